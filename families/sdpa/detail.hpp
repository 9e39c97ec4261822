// The pipeline of the SDPA references, written once (refimpl only; the host impls do not use
// it): one (batch, head) slice gathered from storage order into a matrix, the masked scores,
// and one block of a head's query rows forward and backward as templates over the arithmetic
// type T and a rounding.
// T = double with no rounding (Exact) is the fp64 reference; T = float rounding to the dtype
// (ToDtype) where an ideal flash kernel must round is the same-precision reference
// (families/sdpa/reference.cpp and families/sdpa/backward_reference.cpp say which roundings and why).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Dense>

#include "families/sdpa/sdpa.hpp"
#include "refimpl/gemm.hpp"

namespace opcts::sdpa::detail {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// op(a)·op(b) (op: transposed when `ta` / `tb`) by the references' GEMM at the CPU's best ISA
/// level (refimpl/gemm.hpp); an Eigen expression argument is evaluated first, as Eigen's own
/// product would.
template <typename T>
RowMajor<T> mul(const RowMajor<T>& a, bool ta, const RowMajor<T>& b, bool tb) {
  const int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols(), n = tb ? b.rows() : b.cols();
  RowMajor<T> c(m, n);
  ref::gemm<T>(m, n, k, {a.data(), a.cols(), ta}, {b.data(), b.cols(), tb}, c.data(), n);
  return c;
}

/// Rows [row0, row0 + m) of c += op(a)·op(b) (m rows of op(a)), as mul.
template <typename T>
void add_mul_rows(RowMajor<T>& c, int64_t row0, const RowMajor<T>& a, bool ta, const RowMajor<T>& b, bool tb) {
  const int64_t m = ta ? a.cols() : a.rows();
  ref::gemm<T>(m, c.cols(), ta ? a.rows() : a.cols(), {a.data(), a.cols(), ta}, {b.data(), b.cols(), tb},
               c.data() + row0 * c.cols(), c.cols(), true);
}

/// A block of one head's query rows, [r0, r0 + rows), and the keys [k0, k0 + keys) its rows can
/// see: the union of their [first_key(i), last_key(i)] (the causal alignments and the window; an
/// attn_mask is data and masks inside it). A row's outputs depend on its own scores only, so
/// the references run a head block by block, each block a dense problem of rows × keys whose
/// keys are the only ones it reads; dK and dV add each block's share into their rows
/// [k0, k0 + keys). The keys a block skips would each contribute an exact 0 (their P and dS
/// are 0), so the sums are those of the same nonzero products, grouped otherwise
/// (refimpl/gemm.hpp's bound holds as before). 128 rows keep the products large enough for the
/// GEMM's full rate and a block's [rows, keys] matrices in cache: a head's whole [Sq, Sk]
/// matrices were 32 MiB each in fp64 at 2048², fresh mmap'd pages at every allocation (12% of
/// a backward reference in page faults), and computed the masked half of a causal head.
struct RowBlock {
  int64_t r0 = 0, rows = 0, k0 = 0, keys = 0;
};

inline constexpr int64_t kBlockRows = 128;

/// The row blocks of a head of p, in row order (a block whose rows see no key has keys = 0).
inline std::vector<RowBlock> row_blocks(const Problem& p) {
  std::vector<RowBlock> out;
  for (int64_t r0 = 0; r0 < p.seq_q; r0 += kBlockRows) {
    RowBlock blk{r0, std::min(kBlockRows, p.seq_q - r0), p.seq_k, 0};
    int64_t end = 0;
    for (int64_t i = r0; i < r0 + blk.rows; ++i)
      if (p.last_key(i) >= p.first_key(i))
        blk.k0 = std::min(blk.k0, p.first_key(i)), end = std::max(end, p.last_key(i) + 1);
    if (end <= blk.k0) blk.k0 = end = 0;
    blk.keys = end - blk.k0;
    out.push_back(blk);
  }
  return out;
}

/// The fp32 floors' unit (families/sdpa/bound.hpp): one fp32 ulp per operation (2^-23;
/// round-to-nearest costs 2^-24, a truncating tensor-core accumulator up to 2^-23).
constexpr double kAccUnit = 0x1p-23;
/// fp32 roundings of a result after its accumulation in a flash kernel: the reciprocal of
/// the row sum (or the scale), the product by it, a rescale and the conversion.
constexpr double kNormalisationRoundings = 4;

/// The fp32 roundings of a score the bounds charge at u·scale·Σ_d |q_d·k_d| beside its dot
/// product's D (families/sdpa/bound.hpp): 4, and 2 more under fp8, whose kernels fold the descales
/// into the softmax scale (FlashAttention 3: scale·q_descale·k_descale), two products of the factor.
inline double score_extra_roundings(const Problem& p) { return p.fp8 != Fp8::none ? 6 : 4; }
/// The normalisation's fp32 roundings of O (kNormalisationRoundings), one more under fp8: v's
/// descale multiplied into the result, and one more for an fp8 output's o_scale.
inline double normalisation_roundings(const Problem& p) {
  return kNormalisationRoundings + (p.fp8 != Fp8::none ? 1 : 0) + (p.fp8_out ? 1 : 0);
}

/// A tensor's values in storage order: its decoded elements, times the descale of the element's
/// (batch entry, KV head) where the problem holds it as fp8 codes (a query head's KV head for q).
/// Dense layouts: a packed problem's references run its sequences (varlen_reference.cpp).
inline std::vector<double> dequantized(const Problem& p, const TensorMap& inputs, char tensor) {
  std::vector<double> x = inputs.at(std::string(1, tensor)).to_f64();
  if (p.fp8 == Fp8::none || (tensor == 'q' && p.fp8 != Fp8::qkv)) return x;
  const std::vector<double> ds = inputs.at(std::string(1, tensor) + "_descale").to_f64();
  const bool q = tensor == 'q', per_head = p.descale == Descale::per_head;
  const Strides st = q ? q_strides(p) : tensor == 'k' ? k_strides(p) : v_strides(p);
  const int64_t heads = q ? p.heads_q : p.heads_kv, seq = q ? p.seq_q : p.seq_k;
  const int64_t dim = tensor == 'v' ? p.head_dim_v : p.head_dim, group = p.heads_q / p.heads_kv;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const double f = per_head ? ds[static_cast<size_t>(b * p.heads_kv + (q ? h / group : h))] : ds[0];
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t d = 0; d < dim; ++d) x[static_cast<size_t>(st.at(b, h, s) + d)] *= f;
    }
  return x;
}

/// No rounding: the fp64 reference.
struct Exact {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};

/// Rounds an fp32 intermediate to the problem's dtype (round to nearest even); bf16 and fp16
/// on the bits (numerics/dtype.hpp's 16-bit forms: the same values as round_to, per element of
/// every P and dS).
struct ToDtype {
  DType t;
  float operator()(float x) const {
    if (t == DType::bf16) return bf16_bits_to_fp32(fp32_to_bf16_bits(x));
    if (t == DType::fp16) return fp16_bits_to_fp32(fp32_to_fp16_bits(x));
    return static_cast<float>(round_to(t, x));
  }
};

/// m with `rnd` applied to every element: m itself under Exact, else a rounded copy in `tmp`.
template <typename T, typename Round>
const RowMajor<T>& rounded(const RowMajor<T>& m, Round rnd, RowMajor<T>& tmp) {
  if constexpr (std::is_same_v<Round, Exact>) {
    return m;
  } else {
    tmp = m.unaryExpr(rnd);
    return tmp;
  }
}

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

/// Writes m into the (b, h) slice of a storage-order output, each element through `round`.
template <typename T, typename Round>
void scatter(std::vector<double>& out, const Strides& st, int64_t b, int64_t h, const RowMajor<T>& m, Round round) {
  for (int64_t s = 0; s < m.rows(); ++s) {
    double* dst = out.data() + st.at(b, h, s);
    for (int64_t x = 0; x < m.cols(); ++x) dst[x] = static_cast<double>(round(m(s, x)));
  }
}

/// The data inputs of a problem's scores beyond q and k: the attn_mask, decoded (storage order
/// [Bm, Hm, Sq, Sk]; empty when none), and the sinks (one logit per query head; empty when none).
struct MaskView {
  const Problem* p = nullptr;
  std::vector<double> values;
  Strides st{0, 0, 0};
  std::vector<double> sinks;
  std::vector<double> alibi;   // ALiBi slopes, [B or 1, Hq] (empty when none)
  std::vector<double> blocks;  // the block mask, [B, Hq, query blocks, key blocks] (empty when none)
  /// Whether row i of (b, h) reads key j's block (true without a block mask).
  bool block_reads(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (blocks.empty()) return true;
    const int64_t nq = (p->seq_q + p->block_q - 1) / p->block_q, nk = (p->seq_k + p->block_k - 1) / p->block_k;
    return blocks[static_cast<size_t>(((b * p->heads_q + h) * nq + i / p->block_q) * nk + j / p->block_k)] != 0;
  }
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
  if (p.sinks) m.sinks = inputs.at("sinks").to_f64();
  if (p.alibi != Alibi::none) m.alibi = inputs.at("alibi_slopes").to_f64();
  if (p.block_sparse()) m.blocks = inputs.at("block_mask").to_f64();
  return m;
}

/// One row block's final scores, in place. S = Q·Kᵀ arrives unscaled; this applies the scale, the
/// softcap (s = c·tanh(s/c)), the ALiBi bias (its product in T: *bias receives |bias|) and the
/// additive mask, and sets -inf for keys outside the causal range, the window, the boolean mask
/// or the key blocks the row's query block reads. With a softcap, *dcap receives 1 − tanh²(x/c), the softcap's
/// derivative (0 where masked). No rounding: both references keep scores in T, as a flash kernel keeps them in fp32
/// registers.
template <typename T>
void scores_head(const Problem& p, const MaskView& mask, int64_t b, int64_t h, const RowBlock& blk, RowMajor<T>& s,
                 RowMajor<T>* dcap, RowMajor<T>* bias = nullptr) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T scale = static_cast<T>(p.effective_scale());
  const T cap = static_cast<T>(p.softcap);
  const bool capped = p.softcap > 0;
  if (capped && dcap) dcap->setZero(s.rows(), s.cols());
  const bool alibi = !mask.alibi.empty();
  if (alibi && bias) bias->setZero(s.rows(), s.cols());
  for (int64_t i = 0; i < s.rows(); ++i) {
    const int64_t gi = blk.r0 + i, first = p.first_key(gi) - blk.k0, last = p.last_key(gi) - blk.k0;
    for (int64_t j = 0; j < s.cols(); ++j) {
      bool keep = j >= first && j <= last;
      if (keep && p.mask_tensor == MaskTensor::boolean) keep = mask.at(b, h, gi, blk.k0 + j) != 0;
      if (keep) keep = mask.block_reads(b, h, gi, blk.k0 + j);
      if (!keep) {
        s(i, j) = neg_inf;
        continue;
      }
      T x = scale * s(i, j);
      if (capped) {
        const T y = std::tanh(x / cap);
        if (dcap) (*dcap)(i, j) = T(1) - y * y;
        x = cap * y;
      }
      if (alibi) {
        const int64_t hq = p.heads_q, dist = std::abs(gi + p.seq_k - p.seq_q - (blk.k0 + j));
        const T slope =
            static_cast<T>(mask.alibi[static_cast<size_t>((p.alibi == Alibi::per_batch_head ? b : 0) * hq + h)]);
        const T bias_ij = slope * static_cast<T>(dist);
        if (bias) (*bias)(i, j) = bias_ij;
        x -= bias_ij;
      }
      if (p.mask_tensor == MaskTensor::additive) x += static_cast<T>(mask.at(b, h, gi, blk.k0 + j));
      s(i, j) = x;
    }
  }
}

/// One row block of a (batch, query head)'s forward in T (keys: the block's).
template <typename T>
struct ForwardHead {
  // exp(s_ij − m_i) at visible keys (m_i the row max, the sink's logit included), else 0
  RowMajor<T> e;
  std::vector<T> l;           // Σ_j e_ij + sink_e_i (0 for a row without keys or sink)
  std::vector<T> lse;         // m_i + log l_i (-inf for a row without keys or sink)
  std::vector<T> sink_e;      // exp(sink − m_i), the sink's term of l (0 without sinks)
  std::vector<int64_t> keys;  // visible keys of the row (attn_mask applied)
  RowMajor<T> o;              // Σ_j rnd(e_ij)·v_j / l_i, before the output rounding
  RowMajor<T> dcap;           // 1 − tanh², with a softcap and want_dcap only
  // s_ij − m_i at visible keys, else 0, and |ALiBi bias| (empty without ALiBi): kept where Round
  // rounds (the same-precision pipeline), whose bounds read them (families/sdpa/bound.hpp)
  RowMajor<T> shift, bias;
  T sink = -std::numeric_limits<T>::infinity();  // the head's sink logit (-inf: none)
};

/// |ALiBi bias| of (i, j) in a forward's row block, 0 without ALiBi (its roundings' terms in
/// families/sdpa/bound.hpp and lse_floor.hpp).
template <typename T>
T alibi_bias(const ForwardHead<T>& f, int64_t i, int64_t j) {
  return f.bias.size() > 0 ? f.bias(i, j) : T(0);
}

/// The forward of row block `blk` of head (b, h), from its rows of q (qh) and its keys' rows
/// of k and v (kh, vh): scores, a softmax against the row's final max, and
/// O = (rnd(E)·V) / l, where rnd is what the P·V product takes (identity for fp64). A row
/// without keys (all scores -inf) gives O = 0 and lse = -inf, or lse = sink with sinks. The sink
/// joins the row max and l (it has no value: it adds nothing to E·V).
template <typename T, typename Round>
ForwardHead<T> forward_head(const Problem& p, const MaskView& mask, int64_t b, int64_t h, const RowBlock& blk,
                            const RowMajor<T>& qh, const RowMajor<T>& kh, const RowMajor<T>& vh, bool want_dcap,
                            Round rnd) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  ForwardHead<T> f;
  f.e = mul(qh, false, kh, true);
  constexpr bool kKeepShift = !std::is_same_v<Round, Exact>;
  scores_head(p, mask, b, h, blk, f.e, want_dcap ? &f.dcap : nullptr, kKeepShift ? &f.bias : nullptr);
  const int64_t sq = f.e.rows(), sk = f.e.cols();
  if constexpr (kKeepShift) f.shift.setZero(sq, sk);
  f.l.assign(static_cast<size_t>(sq), T(0));
  f.lse.assign(static_cast<size_t>(sq), neg_inf);
  f.keys.assign(static_cast<size_t>(sq), 0);
  f.sink_e.assign(static_cast<size_t>(sq), T(0));
  const bool sunk = !mask.sinks.empty();
  const T sink = f.sink = sunk ? static_cast<T>(mask.sinks[static_cast<size_t>(h)]) : neg_inf;
  for (int64_t i = 0; i < sq; ++i) {
    T m = neg_inf;
    for (int64_t j = 0; j < sk; ++j) {
      const T x = f.e(i, j);
      if (x == neg_inf) continue;
      m = std::max(m, x);
      ++f.keys[i];
    }
    if (m == neg_inf) {  // no key (or every key at -inf): O = 0, lse = -inf, or the sink's alone
      f.e.row(i).setZero();
      if (sunk) f.sink_e[i] = f.l[i] = T(1), f.lse[i] = sink;
      continue;
    }
    m = std::max(m, sink);
    T l = 0;
    if (sunk) l = f.sink_e[i] = std::exp(sink - m);
    for (int64_t j = 0; j < sk; ++j) {
      const bool masked = f.e(i, j) == neg_inf;
      const T d = masked ? T(0) : f.e(i, j) - m;
      const T x = masked ? T(0) : std::exp(d);
      if constexpr (kKeepShift) f.shift(i, j) = d;
      f.e(i, j) = x;
      l += x;
    }
    f.l[i] = l;
    f.lse[i] = m + std::log(l);
  }
  RowMajor<T> tmp;
  f.o = mul(rounded(f.e, rnd, tmp), false, vh, false);
  for (int64_t i = 0; i < sq; ++i) {
    if (f.l[i] > 0) f.o.row(i) /= f.l[i];
    else f.o.row(i).setZero();
  }
  return f;
}

/// One row block of a (batch, query head)'s backward in T.
template <typename T>
struct BackwardHead {
  ForwardHead<T> f;  // the block's forward (its e copied into p)
  RowMajor<T> p;     // P = e / l (0 at masked keys and in rows without keys)
  RowMajor<T> ds;    // dS = P ⊙ (dP − D) (⊙ dcap), before rounding; 0 where P is 0
  RowMajor<T> o;     // O as the backward reads it: the forward's output rounded like it is stored
  RowMajor<T> dq;    // scale·Σ_j rnd(dS_ij)·k_j, before the output rounding
  std::vector<T> d;  // D_i = rowsum(dO ⊙ O)
  RowMajor<T> dp;    // dP = dO·Vᵀ (sinks and dbias only: their bounds read it)
  RowMajor<T> dsb;   // dS before the softcap's derivative, with dbias and a softcap only
  /// The additive mask's gradient dS' = P ⊙ (dP − D): dS itself without a softcap.
  const RowMajor<T>& bias_grad() const { return dsb.size() > 0 ? dsb : ds; }
};

/// The backward of row block `blk` of query head (b, h) at dO (FlashAttention-2, Algorithm 2),
/// from the block's rows of q and dO and its keys' rows of k and v: its forward,
/// D_i = rowsum(dO ⊙ rnd(O)), dP = dO·Vᵀ, dS = P ⊙ (dP − D) (⊙ dcap); adds rnd(P)ᵀ·dO to dv's
/// and rnd(dS)ᵀ·Q (unscaled) to dk's rows of the block's keys (dk, dv: [Sk, D] and [Sk, Dv]),
/// the sums over the row blocks and the GQA group, and returns the block's dQ. `exact_zeros`
/// (the fp64 reference): a row whose only nonzero P is 1 has D = dO·v_j = dP_ij, so its dS is
/// exactly 0; setting it so keeps the ~1e-17 of rounding out of a gradient that is 0 (not with
/// sinks: the sink takes a share of the row, P_ij < 1 and dS_ij = P_ij·dP_ij·(1 − P_ij)).
template <typename T, typename Round>
BackwardHead<T> backward_head(const Problem& p, const MaskView& mask, int64_t b, int64_t h, const RowBlock& blk,
                              const RowMajor<T>& qh, const RowMajor<T>& kh, const RowMajor<T>& vh,
                              const RowMajor<T>& doh, Round rnd, bool exact_zeros, RowMajor<T>& dk, RowMajor<T>& dv) {
  BackwardHead<T> r;
  ForwardHead<T>& f = r.f;
  f = forward_head(p, mask, b, h, blk, qh, kh, vh, true, rnd);
  RowMajor<T> tmp;
  r.o = rounded(f.o, rnd, tmp);
  r.p = f.e;
  const int64_t sq = r.p.rows(), sk = r.p.cols();
  std::vector<T>& dsum = r.d;
  dsum.resize(static_cast<size_t>(sq));
  for (int64_t i = 0; i < sq; ++i) {
    if (f.l[i] > 0) r.p.row(i) /= f.l[i];
    dsum[i] = r.o.row(i).dot(doh.row(i));
  }
  add_mul_rows(dv, blk.k0, rounded(r.p, rnd, tmp), true, doh, false);
  r.ds = mul(doh, false, vh, true);
  if (p.sinks || p.dbias) r.dp = r.ds;
  if (p.sinks) exact_zeros = false;
  const bool capped = p.softcap > 0;
  if (capped && p.dbias) r.dsb.resize(sq, sk);
  for (int64_t i = 0; i < sq; ++i) {
    int64_t nonzero = 0;
    for (int64_t j = 0; j < sk; ++j) nonzero += r.p(i, j) != T(0);
    for (int64_t j = 0; j < sk; ++j) {
      const T pij = r.p(i, j);
      T ds = pij == T(0) || (exact_zeros && nonzero == 1) ? T(0) : pij * (r.ds(i, j) - dsum[i]);
      if (r.dsb.size() > 0) r.dsb(i, j) = ds;
      if (capped) ds *= f.dcap(i, j);
      r.ds(i, j) = ds;
    }
  }
  const RowMajor<T>& dsr = rounded(r.ds, rnd, tmp);
  r.dq = mul(dsr, false, kh, false) * static_cast<T>(p.effective_scale());
  add_mul_rows(dk, blk.k0, dsr, true, qh, false);
  return r;
}

}  // namespace opcts::sdpa::detail
