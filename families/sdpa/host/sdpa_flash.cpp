// host.flash: an independent CPU flash attention (forward and backward) with a flash
// kernel's numerics, for every variant of the sdpa family. It shares no code with refimpl's
// references: the visible-key ranges, strides, scores and argument checks are its own.
//
// Forward (FlashAttention-2, Dao 2023, Algorithm 1): per query row, the keys of its visible
// range [lo, hi] (causal ∩ window, bottom-right aligned window) in tiles of kTile with a
// running max m, running sum l and an fp32 accumulator. Per tile, scores in fp32
// (s = scale·q·k, then softcap·tanh(s/softcap), then the additive mask; boolean-masked keys
// are skipped), the unnormalised probabilities rounded to the input dtype (a tensor-core
// P·V takes them in that dtype), the accumulator rescaled by exp(m_old − m_new). A tile
// whose keys are all masked changes nothing. O = acc / l rounded to the dtype;
// logsumexp = m + log(l); a row without keys: O = 0, logsumexp = -inf. ALiBi subtracts
// slope·|i + Sk − Sq − j| after the softcap, in fp32. Sinks join l after the
// last tile as FlashAttention 4's epilogue does, l += exp(sink − m) with m the keys' max; a row
// without keys then has O = 0 and logsumexp = sink. FP8 (FlashAttention 3's fp8 forward): the
// codes go into the products as they are, the descales of the row's (batch, KV head) folded into
// the score's factor (scale·q_descale·k_descale, in fp32) and v's multiplied into O at the end; P
// is rounded to e4m3fn for P·V under fp8 qkv (an fp8 MMA's operand), to the dtype under an fp8 KV
// cache.
//
// Backward (FlashAttention-2, Algorithm 2): the forward's O (rounded to the dtype) and lse,
// D_i = rowsum(dO ⊙ O) in fp32; then per (batch, KV head) and key tile, for every query
// head of the group and row: P = exp(s − lse) in fp32, dV += round(P)·dO, dP = dO·V,
// dS = P ⊙ (dP − D) (times 1 − tanh² with a softcap), dK += round(dS)·Q,
// dQ += round(dS)·K, all accumulated in fp32 and scaled by the scale at the end; the
// rounded values are what a kernel feeds its MMAs in the dtype. With sinks, P = exp(s − lse)
// takes the sink's share from lse, and dsink_h = −Σ_(b,i) exp(sink_h − lse_i)·D_i, each (batch,
// head)'s rows summed in order, then the batch entries in order. dbias sums dS′ = P ⊙ (dP − D)
// (before the softcap's derivative) in fp32 likewise: a (batch, head)'s rows where the mask
// broadcasts over the queries, then the batch entries and heads it broadcasts over, in order.
// Block-sparse: a key of a block the row's query block does not read is never read (its score is
// -inf before its dot product).
#include "families/sdpa/host/sdpa_flash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/errors.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace host_sdpa {

namespace {

constexpr int64_t kTile = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Str {
  int64_t b, h, s;
  int64_t at(int64_t bi, int64_t hi, int64_t si) const { return bi * b + hi * h + si * s; }
};

std::vector<float> decode(const HostTensor& x) {
  const auto d = x.to_f64();
  return std::vector<float>(d.begin(), d.end());
}

// The argument checks every impl makes (the sdpa family's negative cases).
void check_arguments(const sdpa::Problem& p) {
  if (p.heads_q % p.heads_kv != 0)
    throw InvalidArgument("heads_kv", std::to_string(p.heads_q) + " query heads are not a multiple of " +
                                          std::to_string(p.heads_kv) + " KV heads");
  if (p.window_left < -1) throw InvalidArgument("window_left", "must be >= -1, got " + std::to_string(p.window_left));
  if (p.window_right < -1)
    throw InvalidArgument("window_right", "must be >= -1, got " + std::to_string(p.window_right));
  if (p.softcap < 0) throw InvalidArgument("softcap", "must be >= 0");
}

class Kernel {
 public:
  // opt.align: the offset of the bottom-right alignment, Sk − Sq unless a caller (a planted
  // varlen bug) says otherwise; opt.key_begin/end: the keys this run may read (a split).
  Kernel(const sdpa::Problem& p, const TensorMap& in, Plant plant, const DenseOptions& opt)
      : p_(p), plant_(plant), unrounded_(opt.unrounded), normalised_p_(opt.normalised_p) {
    tile_ = opt.key_tile                                          ? opt.key_tile
            : plant == Plant::batch_variant_tiles && p.batch == 1 ? sdpa::kBatchVariantTile
                                                                  : kTile;
    B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k, D = p.head_dim, Dv = p.head_dim_v;
    align_ = opt.align ? *opt.align : Sk - Sq;
    key_begin_ = opt.key_begin;
    key_end_ = opt.key_end < 0 ? Sk : std::min(opt.key_end, Sk);
    group = Hq / Hkv;
    scale = static_cast<float>(p.scale ? *p.scale : 1.0 / std::sqrt(static_cast<double>(D)));
    cap = static_cast<float>(p.softcap);
    const bool bshd = p.layout == sdpa::Layout::bshd;
    auto str = [&](int64_t heads, int64_t seq, int64_t d) {
      return bshd ? Str{seq * heads * d, d, heads * d} : Str{heads * seq * d, seq * d, d};
    };
    qs = str(Hq, Sq, D), ks = str(Hkv, Sk, D), vs = str(Hkv, Sk, Dv), os = str(Hq, Sq, Dv);
    q = decode(in.at("q")), k = decode(in.at("k")), v = decode(in.at("v"));
    if (p.fp8 != sdpa::Fp8::none) read_descales(in);
    if (p.fp8_out) {
      const auto it = in.find("o_scale");
      if (it == in.end() || it->second.dtype() != DType::fp32 || it->second.numel() != 1)
        throw InvalidArgument("o_scale", "must be fp32 [1]: an fp8 output needs its scale");
      o_scale = static_cast<float>(it->second.get(0));
      if (plant == Plant::fp8_out_scale_inverted) o_scale = 1.0f / o_scale;
    }
    if (p.sinks && !opt.without_sinks) {
      const auto it = in.find("sinks");
      if (it == in.end() || it->second.dtype() != DType::fp32 || it->second.numel() != Hq)
        throw InvalidArgument("sinks", "must be fp32 [heads_q]: one sink logit per query head");
      sinks = decode(it->second);
    }
    if (p.alibi != sdpa::Alibi::none) {
      const HostTensor& s = in.at("alibi_slopes");
      const int64_t rows = p.alibi == sdpa::Alibi::per_batch_head ? B : 1;
      if (s.dtype() != DType::fp32 || s.numel() != rows * Hq)
        throw InvalidArgument("alibi_slopes", p.alibi == sdpa::Alibi::per_batch_head ? "must be fp32 [batch, heads_q]"
                                                                                     : "must be fp32 [heads_q]");
      slopes = decode(s);
    }
    if (p.block_q > 0) read_blocks(in.at("block_mask"));
    if (p.mask_tensor != sdpa::MaskTensor::none) {
      mask = decode(in.at("attn_mask"));
      mask_rows = p.mask_per_query ? Sq : 1;
      const int64_t hs = mask_rows * Sk;
      ms = {p.mask_per_batch ? (p.mask_per_head ? Hq : 1) * hs : 0, p.mask_per_head ? hs : 0,
            p.mask_per_query ? Sk : 0};
    }
  }

  // fp8: the descales, checked, with the plants' slips (k's and v's swapped).
  void read_descales(const TensorMap& in) {
    const bool per_head = p_.descale == sdpa::Descale::per_head;
    const auto read = [&](const char* name) {
      const auto it = in.find(name);
      if (it == in.end()) throw InvalidArgument(name, "missing: fp8 inputs need their descales");
      if (it->second.dtype() != DType::fp32 || it->second.numel() != (per_head ? B * Hkv : 1))
        throw InvalidArgument(name, per_head ? "must be fp32 [batch, heads_kv]" : "must be fp32 [1]");
      return decode(it->second);
    };
    if (p_.fp8 == sdpa::Fp8::qkv) q_descale = read("q_descale");
    k_descale = read("k_descale");
    v_descale = read("v_descale");
    if (plant_ == Plant::fp8_descale_swapped) std::swap(k_descale, v_descale);
  }
  // The descale of (batch b, KV head hk) in d (1 where d is empty: not fp8); the head0 plant reads
  // entry [0, 0] for every one.
  float descale(const std::vector<float>& d, int64_t b, int64_t hk) const {
    if (d.empty()) return 1.0f;
    if (p_.descale != sdpa::Descale::per_head || plant_ == Plant::fp8_descale_head0) return d[0];
    return d[b * Hkv + hk];
  }
  // The factor of q·k in a score: the softmax scale, with fp8's descales folded in (FlashAttention
  // 3: softmax_scale·q_descale·k_descale) — the first fp8 tensor's twice under its plant.
  float score_scale(int64_t b, int64_t hk) const {
    if (p_.fp8 == sdpa::Fp8::none) return scale;
    float f = scale;
    const std::vector<float>& first = q_descale.empty() ? k_descale : q_descale;
    if (plant_ == Plant::fp8_descale_twice) f *= descale(first, b, hk);
    f *= descale(q_descale, b, hk);
    return f * descale(k_descale, b, hk);
  }

  // The block mask as this kernel walks it: per (batch, head, query block) the key blocks it
  // reads, the plants' slips applied (the last one dropped; the one after each run read too).
  void read_blocks(const HostTensor& t) {
    nqb = (Sq + p_.block_q - 1) / p_.block_q, nkb = (Sk + p_.block_k - 1) / p_.block_k;
    if (t.dtype() != DType::bool8 || t.numel() != B * Hq * nqb * nkb)
      throw InvalidArgument("block_mask",
                            "must be bool8 [batch, heads_q, ceil(seq_q / block_q), ceil(seq_k / block_k)]");
    blocks.assign(static_cast<size_t>(t.numel()), 0);
    for (int64_t e = 0; e < t.numel(); ++e) blocks[e] = t.get(e) != 0;
    for (int64_t row = 0; row < B * Hq * nqb; ++row) {
      char* r = blocks.data() + row * nkb;
      if (plant_ == Plant::block_last_dropped)
        for (int64_t kb = nkb - 1; kb >= 0; --kb)
          if (r[kb]) {
            r[kb] = 0;
            break;
          }
      if (plant_ == Plant::block_one_past)
        for (int64_t kb = nkb - 1; kb > 0; --kb)
          if (r[kb - 1] && !r[kb]) r[kb] = 1;
    }
  }
  bool block_reads(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return blocks.empty() || blocks[((b * Hq + h) * nqb + i / p_.block_q) * nkb + j / p_.block_k] != 0;
  }

  // The visible range of row i: causal ∩ window ∩ chunk, the window's sides and the chunk of the
  // row's position i + align bottom-right aligned.
  int64_t lo(int64_t i) const {
    int64_t l = key_begin_;
    if (p_.window_left >= 0) {
      int64_t w = i + align_ - p_.window_left;
      if (plant_ == Plant::window_off_by_one) --w;
      l = std::max(l, w);
    }
    if (p_.chunk > 0) l = std::max(l, chunk_first(i) - (plant_ == Plant::chunk_off_by_one ? 1 : 0));
    return l;
  }
  int64_t hi(int64_t i) const {
    int64_t h = key_end_ - 1;
    if (p_.chunk > 0) h = std::min(h, chunk_first(i) + p_.chunk - 1);
    if (p_.mask == sdpa::Mask::causal_upper_left) h = std::min(h, i);
    if (p_.mask == sdpa::Mask::causal_lower_right) h = std::min(h, i + align_);
    if (p_.window_right >= 0) h = std::min(h, i + align_ + p_.window_right);
    return h;
  }
  int64_t kv_head(int64_t h) const { return plant_ == Plant::gqa_modulo ? h % Hkv : h / group; }
  // The first key of the chunk holding row i's position a = i + align: ⌊a / C⌋·C (floor for a < 0).
  int64_t chunk_first(int64_t i) const {
    const int64_t a = i + align_, c = p_.chunk;
    return (a >= 0 ? a / c : -((-a + c - 1) / c)) * c;
  }

  // The final score of (row i of head h, key j) in fp32, -inf when the boolean mask drops it;
  // *dcap receives the softcap's derivative 1 − tanh².
  float score(int64_t b, int64_t h, int64_t i, int64_t j, const float* qi, const float* kj, float* dcap,
              float qk_scale) const {
    const int64_t mh = plant_ == Plant::amask_kv_head ? h / group : h;  // the plant reads its KV head's mask
    // The transposed plant reads element (j, i) of a square mask (Sq = Sk: supports()).
    const int64_t me = plant_ == Plant::amask_transposed ? ms.at(b, mh, j) + i : ms.at(b, mh, i) + j;
    if (p_.mask_tensor == sdpa::MaskTensor::boolean && mask[me] == 0.0f) return kNegInf;
    if (!block_reads(b, h, i, j)) return kNegInf;  // a skipped block: never read
    float dot = 0.0f;
    for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
    float s = dot * qk_scale;
    if (cap > 0) {
      const float th = std::tanh(s / cap);
      s = cap * th;
      if (dcap) *dcap = 1.0f - th * th;
    }
    if (!slopes.empty())
      s -= alibi_slope(b, h) * static_cast<float>(std::abs(i + (plant_ == Plant::alibi_upper_left ? 0 : align_) - j));
    if (p_.mask_tensor == sdpa::MaskTensor::additive) s += mask[me];
    return s;
  }
  // The ALiBi slope of (batch b, query head h); the alibi_kv_head plant reads its KV head's.
  float alibi_slope(int64_t b, int64_t h) const {
    const int64_t head = plant_ == Plant::alibi_kv_head ? h / group : h;
    return slopes[(p_.alibi == sdpa::Alibi::per_batch_head ? b : 0) * Hq + head];
  }

  // Forward of row i of (b, h): O (unrounded fp32, Dv values) and lse.
  void forward_row(int64_t b, int64_t h, int64_t i, float* o, float& lse) const {
    if (normalised_p_) return forward_row_normalised(b, h, i, o, lse);
    const int64_t hk = kv_head(h);
    const float* qi = q.data() + qs.at(b, h, i);
    const int64_t first = lo(i), last = hi(i);
    std::vector<float> acc(Dv, 0.0f), s(tile_);
    float m = kNegInf, l = 0.0f;
    const float qk_scale = score_scale(b, hk);
    for (int64_t j0 = first; j0 <= last; j0 += tile_) {
      const int64_t jn = std::min(tile_, last + 1 - j0);
      float tile_max = kNegInf;
      for (int64_t j = 0; j < jn; ++j) {
        s[j] = score(b, h, i, j0 + j, qi, k.data() + ks.at(b, hk, j0 + j), nullptr, qk_scale);
        tile_max = std::max(tile_max, s[j]);
      }
      if (tile_max == kNegInf) continue;  // every key of the tile masked
      const float m_new = std::max(m, tile_max);
      const float correction = std::exp(m - m_new);  // exp(-inf) = 0 on the first tile
      l *= correction;
      for (int64_t d = 0; d < Dv; ++d) acc[d] *= correction;
      for (int64_t j = 0; j < jn; ++j) {
        if (s[j] == kNegInf) continue;
        const float pj = std::exp(s[j] - m_new);
        l += pj;
        const float pr = round_p(pj);
        const float* vj = v.data() + vs.at(b, hk, j0 + j);
        for (int64_t d = 0; d < Dv; ++d) acc[d] += pr * vj[d];
      }
      if (plant_ == Plant::pv_in_dtype)
        for (int64_t d = 0; d < Dv; ++d) acc[d] = rnd(acc[d]);
      if (plant_ == Plant::rowsum_in_dtype) l = rnd(l);
      m = m_new;
    }
    const bool empty = l == 0.0f;
    const float l_keys = l;
    if (!sinks.empty() && !empty) l += std::exp(sinks[h] - m);
    // fp8: v's descale on the result (V's codes went into the products).
    const float vd = descale(v_descale, b, hk);
    const float l_o = plant_ == Plant::sink_denominator_omitted ? l_keys : l;
    for (int64_t d = 0; d < Dv; ++d) o[d] = empty && plant_ != Plant::masked_row_nan ? 0.0f : acc[d] * vd / l_o;
    lse = empty ? kNegInf : m + std::log(plant_ == Plant::lse_plus_log2 ? 2.0f * l : l);
    if (plant_ == Plant::sink_lse_omitted && !empty) lse = m + std::log(l_keys);
    if (!sinks.empty() && empty) lse = sinks[h];  // the sink alone: O = 0 (a split-KV split's too)
  }

  // forward_row under cuDNN's fp8 graph (flash_run_normalised_p): the softmax's m and l over the
  // row's keys first (a sink joins l), then P = e/l·scale_s cast to Q's fp8 type, summed with V's
  // codes in fp32, and O = acc/scale_s·descale_v. The fp8_p_unscaled plant casts e/l itself.
  void forward_row_normalised(int64_t b, int64_t h, int64_t i, float* o, float& lse) const {
    const int64_t hk = kv_head(h), first = lo(i), n = std::max<int64_t>(0, hi(i) + 1 - first);
    const float* qi = q.data() + qs.at(b, h, i);
    const float qk_scale = score_scale(b, hk);
    std::vector<float> s(n);
    float m = kNegInf, l = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = score(b, h, i, first + j, qi, k.data() + ks.at(b, hk, first + j), nullptr, qk_scale);
      m = std::max(m, s[j]);
    }
    std::vector<float> acc(Dv, 0.0f);
    if (m == kNegInf) {  // no key: l would be exp(-inf + inf) = NaN; O = 0 as in forward_row
      std::fill(o, o + Dv, 0.0f);
      lse = sinks.empty() ? kNegInf : sinks[h];
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      if (s[j] != kNegInf) l += std::exp(s[j] - m);
    if (!sinks.empty()) l += std::exp(sinks[h] - m);
    const float scale_s = plant_ == Plant::fp8_p_unscaled ? 1.0f : static_cast<float>(sdpa::kFp8ScaleS);
    for (int64_t j = 0; j < n; ++j) {
      if (s[j] == kNegInf) continue;
      const float pr = static_cast<float>(round_to(p_.q_dtype(), std::exp(s[j] - m) / l * scale_s));
      const float* vj = v.data() + vs.at(b, hk, first + j);
      for (int64_t d = 0; d < Dv; ++d) acc[d] += pr * vj[d];
    }
    const float vd = descale(v_descale, b, hk);
    for (int64_t d = 0; d < Dv; ++d) o[d] = acc[d] / scale_s * vd;
    lse = m + std::log(l);
  }

  float rnd(float x) const { return static_cast<float>(round_to(p_.dtype, x)); }
  // P as the P·V product takes it: e4m3fn under fp8 qkv (an fp8 MMA's operand, as FlashAttention 3
  // rounds it) and under the fp8_p_in_e4m3 plant, else the dtype.
  float round_p(float x) const {
    const bool e4m3 = p_.fp8 == sdpa::Fp8::qkv || plant_ == Plant::fp8_p_in_e4m3;
    return e4m3 ? static_cast<float>(round_to(DType::e4m3fn, x)) : rnd(x);
  }

  TensorMap forward() const {
    TensorMap out;
    // An fp8 output: O·o_scale, rounded to e4m3fn by the store (satfinite).
    HostTensor& o =
        out.emplace("O", HostTensor(unrounded_ ? DType::fp32 : p_.o_dtype(), sdpa::o_shape(p_))).first->second;
    HostTensor& lse = out.emplace("lse", HostTensor(DType::fp32, sdpa::lse_shape(p_))).first->second;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t bh = 0; bh < B * Hq; ++bh) {
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t b = bh / Hq, h = bh % Hq;
        std::vector<float> row(Dv);
        float l = 0;
        forward_row(b, h, i, row.data(), l);
        for (int64_t d = 0; d < Dv; ++d) {
          const double x = row[d] * o_scale;
          // The plant's store: e4m3fn's nonsaturating conversion, NaN past the range.
          o.set(os.at(b, h, i) + d, plant_ == Plant::fp8_out_nonsaturating && !unrounded_ && p_.fp8_out
                                        ? round_to(DType::e4m3fn, x, Overflow::nonsaturating)
                                        : x);
        }
        lse.set(bh * Sq + i, l);
      }
    }
    return out;
  }

  TensorMap backward(const TensorMap& in) const {
    const std::vector<float> d_o = decode(in.at("dO"));
    // The forward as a kernel stores it: O in the dtype, lse in fp32; then D = rowsum(dO ⊙ O).
    std::vector<float> lse(B * Hq * Sq), dsum(B * Hq * Sq), dsink(B * Hq, 0.0f);
#pragma omp parallel for schedule(dynamic)
    for (int64_t bh = 0; bh < B * Hq; ++bh) {
      std::vector<float> row(Dv);
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t b = bh / Hq, h = bh % Hq;
        forward_row(b, h, i, row.data(), lse[bh * Sq + i]);
        float acc = 0.0f;
        const float* doi = d_o.data() + os.at(b, h, i);
        for (int64_t d = 0; d < Dv; ++d) acc += doi[d] * static_cast<float>(round_to(p_.dtype, row[d]));
        dsum[bh * Sq + i] = plant_ == Plant::drop_rowsum ? 0.0f : acc;
        if (!sinks.empty()) dsink[bh] -= std::exp(sinks[h] - lse[bh * Sq + i]) * acc;
        if (plant_ == Plant::dsinks_in_dtype) dsink[bh] = rnd(dsink[bh]);
      }
    }
    TensorMap out;
    if (!sinks.empty()) {
      HostTensor& ds = out.emplace("dsinks", HostTensor(DType::fp32, {Hq})).first->second;
      for (int64_t h = 0; h < Hq; ++h) {
        float sum = 0.0f;
        for (int64_t b = 0; b < B; ++b)
          sum = plant_ == Plant::dsinks_last_batch ? dsink[b * Hq + h]
                : plant_ == Plant::dsinks_in_dtype ? rnd(sum + dsink[b * Hq + h])
                                                   : sum + dsink[b * Hq + h];
        ds.set(h, sum);
      }
    }
    // dbias: each (batch, query head)'s dS′ summed over its rows where the mask broadcasts over
    // them, in fp32, then over the batch entries and heads the mask broadcasts over, in order.
    std::vector<float> dbias(p_.dbias ? B * Hq * mask_rows * Sk : 0, 0.0f);
    const DType grad_t = unrounded_ ? DType::fp32 : p_.dtype;
    HostTensor& dq_t = out.emplace("dQ", HostTensor(grad_t, sdpa::q_shape(p_))).first->second;
    HostTensor& dk_t = out.emplace("dK", HostTensor(grad_t, sdpa::k_shape(p_))).first->second;
    HostTensor& dv_t = out.emplace("dV", HostTensor(grad_t, sdpa::v_shape(p_))).first->second;
    // One (batch, KV head) per task: it owns dK and dV of that head and dQ of its query heads
    // (with gqa_modulo the query heads of a KV head are those h with h % Hkv == hk).
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t hk = 0; hk < Hkv; ++hk) {
        std::vector<int64_t> heads;
        for (int64_t h = 0; h < Hq; ++h)
          if (kv_head(h) == hk) heads.push_back(h);
        std::vector<float> dq(heads.size() * Sq * D, 0.0f);
        std::vector<float> dk(kTile * D), dv(kTile * Dv);
        for (int64_t j0 = 0; j0 < Sk; j0 += kTile) {
          const int64_t jn = std::min(kTile, Sk - j0);
          std::fill(dk.begin(), dk.end(), 0.0f);
          std::fill(dv.begin(), dv.end(), 0.0f);
          for (size_t g = 0; g < heads.size(); ++g) {
            const int64_t h = heads[g];
            for (int64_t i = 0; i < Sq; ++i) {
              const float li = lse[(b * Hq + h) * Sq + i];
              if (li == kNegInf) continue;  // a row without keys: no gradient
              const int64_t first = std::max(lo(i), j0), last = std::min(hi(i), j0 + jn - 1);
              const float* qi = q.data() + qs.at(b, h, i);
              const float* doi = d_o.data() + os.at(b, h, i);
              float* dqi = dq.data() + (g * Sq + i) * D;
              const float di = dsum[(b * Hq + h) * Sq + i];
              for (int64_t j = first; j <= last; ++j) {
                const float* kj = k.data() + ks.at(b, hk, j);
                const float* vj = v.data() + vs.at(b, hk, j);
                float dcap = 1.0f;
                const float s = score(b, h, i, j, qi, kj, &dcap, scale);
                if (s == kNegInf) continue;
                const float pij = std::exp(s - li);
                const float pr = rnd(pij);
                float dp = 0.0f;
                for (int64_t d = 0; d < Dv; ++d) {
                  dv[(j - j0) * Dv + d] += pr * doi[d];
                  dp += doi[d] * vj[d];
                }
                float ds = pij * (dp - di);
                if (!dbias.empty()) {
                  float& acc = dbias[((b * Hq + h) * mask_rows + (p_.mask_per_query ? i : 0)) * Sk + j];
                  const float t = plant_ == Plant::dbias_capped ? ds * dcap : ds;
                  acc = plant_ == Plant::dbias_last_term ? t : plant_ == Plant::dbias_in_dtype ? rnd(acc + t) : acc + t;
                }
                if (cap > 0) ds *= dcap;
                const float dsr = rnd(ds);
                for (int64_t d = 0; d < D; ++d) {
                  dk[(j - j0) * D + d] += dsr * qi[d];
                  dqi[d] += dsr * kj[d];
                }
              }
            }
          }
          for (int64_t j = 0; j < jn; ++j) {
            for (int64_t d = 0; d < D; ++d) dk_t.set(ks.at(b, hk, j0 + j) + d, dk[j * D + d] * scale);
            for (int64_t d = 0; d < Dv; ++d) dv_t.set(vs.at(b, hk, j0 + j) + d, dv[j * Dv + d]);
          }
        }
        for (size_t g = 0; g < heads.size(); ++g)
          for (int64_t i = 0; i < Sq; ++i)
            for (int64_t d = 0; d < D; ++d) dq_t.set(qs.at(b, heads[g], i) + d, dq[(g * Sq + i) * D + d] * scale);
      }
    }
    if (p_.dbias) write_dbias(dbias, out);
    return out;
  }

  // dbias from each (batch, query head)'s sums: the mask's element (bm, hm, row, j) adds those of
  // the batch entries and heads that broadcast onto it, b then h in order.
  void write_dbias(const std::vector<float>& parts, TensorMap& out) const {
    const std::vector<int64_t> shape = sdpa::mask_shape(p_);
    HostTensor& t = out.emplace("dbias", HostTensor(unrounded_ ? DType::fp32 : p_.dtype, shape)).first->second;
    const int64_t slice = mask_rows * Sk;
    std::vector<float> sum(static_cast<size_t>(shape[0] * shape[1] * slice), 0.0f);
    std::vector<char> first(sum.size(), 1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t base = ((p_.mask_per_batch ? b : 0) * shape[1] + (p_.mask_per_head ? h : 0)) * slice;
        for (int64_t e = 0; e < slice; ++e) {
          const float x = parts[(b * Hq + h) * slice + e];
          float& acc = sum[base + e];
          acc = plant_ == Plant::dbias_last_term && !first[base + e] ? x
                : plant_ == Plant::dbias_in_dtype                    ? rnd(acc + x)
                                                                     : acc + x;
          first[base + e] = 0;
        }
      }
    for (size_t e = 0; e < sum.size(); ++e) t.set(static_cast<int64_t>(e), sum[e]);
  }

 private:
  const sdpa::Problem& p_;
  Plant plant_;
  bool unrounded_;
  bool normalised_p_;  // cuDNN's fp8 P: the row's softmax before P·V (forward_row_normalised)
  int64_t tile_;       // the forward's key tile
  int64_t B, Hq, Hkv, Sq, Sk, D, Dv, group, align_, key_begin_, key_end_, mask_rows = 0, nqb = 0, nkb = 0;
  std::vector<char> blocks;  // read_blocks
  float scale, cap;
  Str qs{}, ks{}, vs{}, os{}, ms{0, 0, 0};
  std::vector<float> q, k, v, mask, sinks, slopes;
  std::vector<float> q_descale, k_descale, v_descale;  // fp8 only (empty otherwise)
  float o_scale = 1.0f;                                // fp8_out only
};

}  // namespace

TensorMap flash_run_dense(const sdpa::Problem& p, const TensorMap& in, Plant plant, const DenseOptions& opt) {
  check_arguments(p);
  const Kernel kernel(p, in, plant, opt);
  return p.direction == sdpa::Direction::backward ? kernel.backward(in) : kernel.forward();
}

TensorMap flash_run(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded) {
  check_arguments(p);
  if (p.layout == sdpa::Layout::varlen) return flash_run_varlen(p, in, plant, unrounded);
  if (p.layout == sdpa::Layout::paged) return flash_run_paged(p, in, plant, unrounded);
  DenseOptions opt;
  opt.unrounded = unrounded;
  return flash_run_dense(p, in, plant, opt);
}

TensorMap flash_run_normalised_p(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded) {
  check_arguments(p);
  if (p.fp8 != sdpa::Fp8::qkv)
    throw InvalidArgument("fp8", "cuDNN's fp8 graph takes fp8 q, k and v (fp8: {tensors: qkv})");
  if (p.direction != sdpa::Direction::forward)
    throw InvalidArgument("direction", "cuDNN's fp8 graph here is a forward");
  if (p.layout != sdpa::Layout::bhsd && p.layout != sdpa::Layout::bshd)
    throw InvalidArgument("layout", "cuDNN's fp8 graph here takes the dense layouts (bhsd, bshd)");
  DenseOptions opt;
  opt.unrounded = unrounded;
  opt.normalised_p = true;
  return flash_run_dense(p, in, plant, opt);
}

}  // namespace host_sdpa

namespace {

class HostSdpaFlash final : public Impl {
 public:
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "host.flash"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    return host_sdpa::flash_run(pp.as<sdpa::Problem>(), in, host_sdpa::Plant::none);
  }
  // Each (batch entry, head) runs alone with tiles that depend on nothing but its own row, and a
  // varlen sequence runs as the dense batch of one it is; dsinks and a broadcast dbias sum over the
  // batch, and the runner compares only the elements of one entry's tokens.
  std::vector<InvarianceAxis> invariant_axes(const Problem&) const override {
    return {InvarianceAxis::batch_size, InvarianceAxis::batch_position, InvarianceAxis::packing};
  }
};

}  // namespace

void register_host_sdpa(Registry& reg) {
  reg.add(std::make_unique<HostSdpaFlash>());
  register_host_sdpa_planted(reg);
  register_host_sdpa_normalised_p(reg);
}

}  // namespace opcts
