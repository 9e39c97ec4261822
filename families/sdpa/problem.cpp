// SDPA problem: masks, validation and the stable id in both directions.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "families/sdpa/sdpa.hpp"
#include "numerics/rng.hpp"

namespace opcts::sdpa {

double Problem::effective_scale() const { return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim)); }

namespace {
// The first key of row i's chunk: ⌊a / C⌋·C for its position a = i + Sk − Sq (floor, also for the
// negative positions of rows above the lower-right diagonal).
int64_t chunk_start(const Problem& p, int64_t i) {
  const int64_t a = i + p.seq_k - p.seq_q;
  return (a >= 0 ? a / p.chunk : -((-a + p.chunk - 1) / p.chunk)) * p.chunk;
}
}  // namespace

int64_t Problem::first_key(int64_t i) const {
  int64_t first = window_left < 0 ? 0 : std::max<int64_t>(0, i + seq_k - seq_q - window_left);
  if (chunk > 0) first = std::max(first, chunk_start(*this, i));
  return first;
}

int64_t Problem::last_key(int64_t i) const {
  int64_t last = seq_k - 1;
  if (chunk > 0) last = std::min(last, chunk_start(*this, i) + chunk - 1);
  if (mask == Mask::causal_upper_left) last = std::min(last, i);
  if (mask == Mask::causal_lower_right) last = std::min(last, i + seq_k - seq_q);
  if (window_right >= 0) last = std::min(last, i + seq_k - seq_q + window_right);
  return last;
}

bool Problem::visible(int64_t i, int64_t j) const { return j >= first_key(i) && j <= last_key(i); }

int64_t Problem::keys_of_row(int64_t i) const { return std::max<int64_t>(0, last_key(i) - first_key(i) + 1); }

std::optional<Violation> contract_violation(const Problem& p) {
  if (p.heads_kv > 0 && p.heads_q % p.heads_kv != 0)
    return Violation{"heads_kv", "heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" +
                                     std::to_string(p.heads_kv) + ") for GQA"};
  if (p.window_left < -1)
    return Violation{"window_left", "window_left = " + std::to_string(p.window_left) + " (>= 0, or -1 for unbounded)"};
  if (p.window_right < -1)
    return Violation{"window_right",
                     "window_right = " + std::to_string(p.window_right) + " (>= 0, or -1 for unbounded)"};
  if (p.softcap < 0) return Violation{"softcap", "softcap must be >= 0 (0 = off), got " + std::to_string(p.softcap)};
  if (p.corrupt != Corrupt::none) {
    const std::string name(kCorruptNames[static_cast<size_t>(p.corrupt)]);
    return Violation{name, name + " is malformed in the inputs (corrupt: " + name + ")"};
  }
  return std::nullopt;
}

void check_contract(const Problem& p) {
  if (const auto v = contract_violation(p)) throw InvalidArgument(v->argument, v->why);
}

std::vector<int64_t> block_mask_shape(const Problem& p) {
  if (!p.block_sparse()) return {};
  return {p.batch, p.heads_q, (p.seq_q + p.block_q - 1) / p.block_q, (p.seq_k + p.block_k - 1) / p.block_k};
}

bool block_kept(const Problem& p, int64_t b, int64_t h, int64_t qb, int64_t kb) {
  if (kb % 4 == 3 || qb % 5 == 2) return false;
  const std::vector<int64_t> s = block_mask_shape(p);
  const uint64_t e = static_cast<uint64_t>(((b * s[1] + h) * s[2] + qb) * s[3] + kb);
  return uniform01(0x5ba75e, 0, e) < 0.6;  // a fixed key: the pattern is the problem's, not the seed's
}

std::vector<int64_t> descale_shape(const Problem& p) {
  if (p.descale == Descale::per_head) return {p.batch, p.heads_kv};
  return {1};
}

double fp8_descale(const Problem& p, char tensor, int64_t b, int64_t hk) {
  const double role = tensor == 'q' ? 1.5 : tensor == 'k' ? 0.75 : 1.25;
  const double head = p.descale == Descale::per_head ? (4.0 + static_cast<double>((b + 2 * hk) % 4)) / 4 : 1.0;
  return role * head / 64;
}

std::vector<char> unseen_keys(const Problem& p) {
  // first_key and last_key never decrease with i, so the seen keys are a union of ranges
  // marked with a difference array; block-sparse, each row's range cut to each key block its
  // query block reads, in any batch entry or head.
  std::vector<int64_t> diff(static_cast<size_t>(std::max<int64_t>(p.seq_k, 0)) + 1, 0);
  const std::vector<int64_t> bs = block_mask_shape(p);
  for (int64_t i = 0; i < p.seq_q; ++i) {
    const int64_t f = p.first_key(i), l = p.last_key(i);
    if (l < f) continue;
    if (!p.block_sparse()) {
      ++diff[f];
      --diff[l + 1];
      continue;
    }
    for (int64_t kb = f / p.block_k; kb <= l / p.block_k; ++kb) {
      bool read = false;
      for (int64_t bh = 0; bh < bs[0] * bs[1] && !read; ++bh)
        read = block_kept(p, bh / bs[1], bh % bs[1], i / p.block_q, kb);
      if (!read) continue;
      ++diff[std::max(f, kb * p.block_k)];
      --diff[std::min(l, kb * p.block_k + p.block_k - 1) + 1];
    }
  }
  std::vector<char> unseen(static_cast<size_t>(std::max<int64_t>(p.seq_k, 0)));
  int64_t run = 0;
  for (int64_t j = 0; j < p.seq_k; ++j) {
    run += diff[j];
    unseen[j] = run == 0;
  }
  return unseen;
}

void Problem::validate() const {
  const std::string lay(to_string(layout));
  if (packed()) {
    if (static_cast<int64_t>(seqlens_q.size()) != batch || static_cast<int64_t>(seqlens_k.size()) != batch)
      throw std::invalid_argument(
          "layout " + lay + ": seq.q and seq.k must list one length per sequence (batch = " + std::to_string(batch) +
          ", got " + std::to_string(seqlens_q.size()) + " and " + std::to_string(seqlens_k.size()) + ")");
    for (const auto* lens : {&seqlens_q, &seqlens_k})
      for (int64_t l : *lens)
        if (l < 0) throw std::invalid_argument("seq: a sequence length must be >= 0, got " + std::to_string(l));
    const auto largest = [](const std::vector<int64_t>& v) {
      return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
    };
    if (seq_q != largest(seqlens_q) || seq_k != largest(seqlens_k))
      throw std::invalid_argument("layout " + lay + ": seq.q and seq.k must be the largest lengths");
    if (mask_tensor != MaskTensor::none)
      throw std::invalid_argument("attn_mask: the " + lay +
                                  " layout takes no attn_mask (FlashAttention's varlen API has none)");
    if (total_q() > INT32_MAX || total_k() > INT32_MAX)
      throw std::invalid_argument("seq: cu_seqlens are int32, so a packed batch holds at most 2^31 - 1 tokens");
  } else if (!seqlens_q.empty() || !seqlens_k.empty()) {
    throw std::invalid_argument("seq: lists of lengths need layout: varlen or paged");
  }
  if (paged() != (page_size != 0))
    throw std::invalid_argument(std::string("page_size: ") +
                                (paged() ? "the paged layout needs one" : "only the paged layout has pages"));
  if (paged() && (page_size < 1 || page_size > (int64_t{1} << 20)))
    throw std::invalid_argument("page_size must be in [1, 2^20], got " + std::to_string(page_size));
  if (!paged() && kv_layout != KvLayout::nhd)
    throw std::invalid_argument("kv_layout: the order inside a page, for layout paged only");
  if (paged() && direction != Direction::forward)
    throw std::invalid_argument("direction: a paged KV cache is inference's (flash_attn_with_kvcache): forward only");
  if (pad_k != 0 && (!varlen() || pad_k < 0))
    throw std::invalid_argument("pad_k: padding rows after each sequence's keys (>= 0, layout varlen), got " +
                                std::to_string(pad_k) + " with layout " + lay);
  if (corrupt != Corrupt::none) {
    // seqused_k is an input of the paged layout and of a varlen one with padding rows.
    const bool has_seqused = paged() || (varlen() && pad_k > 0);
    if ((corrupt == Corrupt::block_table && !paged()) || (corrupt == Corrupt::seqused_k && !has_seqused) ||
        (corrupt == Corrupt::cu_seqlens_k && !varlen()) || !packed())
      throw std::invalid_argument("corrupt: " + std::string(kCorruptNames[static_cast<size_t>(corrupt)]) +
                                  " is not an input of the " + lay + " layout");
    if ((corrupt == Corrupt::cu_seqlens_q || corrupt == Corrupt::cu_seqlens_k) && batch < 2)
      throw std::invalid_argument("corrupt: cu_seqlens out of order needs two sequences or more");
    if (corrupt == Corrupt::seqused_k && batch < 1) throw std::invalid_argument("corrupt: seqused_k needs a sequence");
    if (corrupt == Corrupt::block_table && paged() && paged_geometry(*this).owned == 0)
      throw std::invalid_argument("corrupt: block_table needs a sequence with a key (an entry in use)");
  }
  if (shared_prefix != 0) {
    if (!paged() || shared_prefix < 0 || shared_prefix % page_size != 0)
      throw std::invalid_argument("shared_prefix: whole pages of a paged cache (a multiple of page_size >= 0), got " +
                                  std::to_string(shared_prefix));
    for (int64_t lk : seqlens_k)
      if (lk < shared_prefix)
        throw std::invalid_argument("shared_prefix: a sequence of " + std::to_string(lk) +
                                    " keys cannot start with a shared prefix of " + std::to_string(shared_prefix));
  }
  if (paged() && paged_geometry(*this).num_pages > INT32_MAX)
    throw std::invalid_argument("page_size: block_table entries are int32, so the cache holds at most 2^31 - 1 pages");
  auto nonneg = [](const char* name, int64_t v) {
    if (v < 0) throw std::invalid_argument(std::string(name) + " must be >= 0, got " + std::to_string(v));
  };
  nonneg("batch", batch);
  nonneg("chunk", chunk);
  nonneg("seq.q", seq_q);
  nonneg("seq.k", seq_k);
  if (heads_q <= 0 || heads_kv <= 0) throw std::invalid_argument("heads.q and heads.kv must be > 0");
  if (head_dim <= 0) throw std::invalid_argument("head_dim must be > 0, got " + std::to_string(head_dim));
  if (head_dim_v <= 0) throw std::invalid_argument("head_dim.v must be > 0, got " + std::to_string(head_dim_v));
  if (dtype != DType::bf16 && dtype != DType::fp16 && dtype != DType::fp32)
    throw std::invalid_argument("dtype " + std::string(name(dtype)) + " is not an SDPA input type (fp16, bf16, fp32)");
  if (scale && !std::isfinite(*scale)) throw std::invalid_argument("scale must be finite");
  if (!std::isfinite(softcap)) throw std::invalid_argument("softcap must be finite");
  if (mask_tensor == MaskTensor::none && (mask_per_batch || mask_per_head || !mask_per_query))
    throw std::invalid_argument("attn_mask.per_batch / per_head / per_query given without an attn_mask");
  if (fp8 != Fp8::none) {
    if (dtype != DType::bf16 && dtype != DType::fp16)
      throw std::invalid_argument("fp8: O (and the queries of an fp8 KV cache) are bf16 or fp16, not " +
                                  std::string(name(dtype)));
    if (fp8_format != DType::e4m3fn && fp8_format != DType::e5m2)
      throw std::invalid_argument("fp8: format is e4m3fn or e5m2, not " + std::string(name(fp8_format)));
    if (direction != Direction::forward) throw std::invalid_argument("fp8: forward only (direction: forward)");
    if (fp8_out && packed()) throw std::invalid_argument("fp8: out: dense layouts only (bhsd, bshd)");
  } else if (fp8_out) {
    throw std::invalid_argument("fp8: out needs fp8 tensors");
  }
  if (fp8_out_scale != static_cast<int64_t>(kFp8OutScale) && !fp8_out)
    throw std::invalid_argument("fp8: out_scale is the scale of an fp8 output (out: e4m3fn)");
  if (fp8_out_scale < 1 || fp8_out_scale > (int64_t{1} << 24))
    throw std::invalid_argument("fp8: out_scale is an integer in [1, 2^24] (exact in the fp32 o_scale)");
  if (dbias && mask_tensor != MaskTensor::additive)
    throw std::invalid_argument("dbias: the gradient of an additive attn_mask, which the problem does not have");
  if (dbias && direction != Direction::backward)
    throw std::invalid_argument("dbias: a backward output (direction: backward)");
  if ((block_q > 0) != (block_k > 0) || block_q < 0 || block_k < 0)
    throw std::invalid_argument("block_mask: q and k are block sizes, both >= 1 (or none)");
  if (block_sparse() && packed())
    throw std::invalid_argument("block_mask: the dense layouts only (bhsd, bshd), got layout " + lay);
  if (poison_masked && contract_violation(*this) == std::nullopt) {
    bool somewhere = false;
    for (int64_t b = 0; b < (packed() ? batch : std::min<int64_t>(batch, 1)) && !somewhere; ++b) {
      const auto unseen = unseen_keys(packed() ? sequence(b) : *this);
      somewhere = std::find(unseen.begin(), unseen.end(), 1) != unseen.end();
    }
    if (!somewhere && batch > 0 && seq_k > 0)
      throw std::invalid_argument(
          "poison_masked: every key is visible to some query row, so there is nowhere to put the NaN (use a "
          "window, or causal_upper_left with seq.k > seq.q)");
  }
}

std::string problem_id(const Problem& p) { return fields().id(p); }
Problem parse_problem_id(std::string_view id) { return fields().parse_id(id); }

namespace {
// Shapes of a query-side (Q, O) or key-side (K, V) tensor; a varlen tensor's rows are the
// packed tokens instead of [B, S].
enum class Side { q, k };
std::vector<int64_t> stored(const Problem& p, int64_t heads, Side side, int64_t d) {
  const int64_t seq = side == Side::q ? p.seq_q : p.seq_k;
  if (p.paged() && side == Side::k) {  // the cache
    const PagedGeometry g = paged_geometry(p);
    if (p.kv_layout == KvLayout::hnd) return {g.num_pages, heads, p.page_size, d};
    return {g.num_pages, p.page_size, heads, d};
  }
  if (p.packed()) return {side == Side::q ? p.total_q() : p.total_k(), heads, d};
  if (p.layout == Layout::bshd) return {p.batch, seq, heads, d};
  return {p.batch, heads, seq, d};
}
Strides strides_of(const Problem& p, int64_t heads, int64_t seq, int64_t d) {
  if (p.layout == Layout::bshd) return {seq * heads * d, d, heads * d};
  if (p.packed()) return {0, d, heads * d};  // seq: the packed token index (paged K, V: see the cache)
  return {heads * seq * d, seq * d, d};
}
}  // namespace

std::vector<int64_t> q_shape(const Problem& p) { return stored(p, p.heads_q, Side::q, p.head_dim); }
std::vector<int64_t> k_shape(const Problem& p) { return stored(p, p.heads_kv, Side::k, p.head_dim); }
std::vector<int64_t> kv_shape(const Problem& p) { return k_shape(p); }
std::vector<int64_t> v_shape(const Problem& p) { return stored(p, p.heads_kv, Side::k, p.head_dim_v); }
std::vector<int64_t> o_shape(const Problem& p) { return stored(p, p.heads_q, Side::q, p.head_dim_v); }
std::vector<int64_t> lse_shape(const Problem& p) {
  if (p.packed()) return {p.heads_q, p.total_q()};
  return {p.batch, p.heads_q, p.seq_q};
}
std::vector<int64_t> mask_shape(const Problem& p) {
  return {p.mask_per_batch ? p.batch : 1, p.mask_per_head ? p.heads_q : 1, p.mask_per_query ? p.seq_q : 1, p.seq_k};
}
Strides q_strides(const Problem& p) { return strides_of(p, p.heads_q, p.seq_q, p.head_dim); }
Strides k_strides(const Problem& p) { return strides_of(p, p.heads_kv, p.seq_k, p.head_dim); }
Strides v_strides(const Problem& p) { return strides_of(p, p.heads_kv, p.seq_k, p.head_dim_v); }
Strides o_strides(const Problem& p) { return strides_of(p, p.heads_q, p.seq_q, p.head_dim_v); }
Strides mask_strides(const Problem& p) {
  const int64_t hs = (p.mask_per_query ? p.seq_q : 1) * p.seq_k;
  return {p.mask_per_batch ? (p.mask_per_head ? p.heads_q : 1) * hs : 0, p.mask_per_head ? hs : 0,
          p.mask_per_query ? p.seq_k : 0};
}

namespace {

// The varlen bugs: whether some row of sequence b would see another set of keys (as packed
// token indices) than its own. key_offset reads the sequence's keys from one token before its
// start (Sk_b + 1 keys, the first its neighbour's); max_alignment aligns the lower-right mask
// and the window by max_seqlen_k − max_seqlen_q instead of Sk_b − Sq_b. A Problem whose
// seq_k − seq_q is that offset and whose seq_k is Sk_b gives the planted ranges (first_key and
// last_key read only those two).
bool varlen_bug_moves_keys(const Problem& p, int64_t b, int64_t cu_k, PlantedBug bug) {
  const Problem s = p.sequence(b);
  Problem t = s;
  int64_t shift = 0;  // packed index of the planted problem's key 0 minus the sequence's
  if (bug == PlantedBug::varlen_key_offset) {
    if (cu_k == 0) return false;  // nothing before the first key to read
    t.seq_k = s.seq_k + 1;
    shift = -1;
  } else {
    t.seq_q = s.seq_k - (p.seq_k - p.seq_q);
  }
  for (int64_t i = 0; i < s.seq_q; ++i) {
    const int64_t n = s.keys_of_row(i), m = t.keys_of_row(i);
    if (n != m) return true;
    if (n > 0 && s.first_key(i) != t.first_key(i) + shift) return true;
  }
  return false;
}

// Whether an ALiBi plant moves row i's outputs. The plant changes the row's bias by c(j): the
// upper-left plant by slope·(|i + Δ − j| − |i − j|) (Δ = Sk − Sq), constant for keys on one side
// of both diagonals and strictly monotone between them; the KV-head plant by (slope_h −
// slope_kv)·|i + Δ − j|, which differs for a head h >= 1 of a GQA group. A change common to the
// row's keys moves its lse (the forward shows it where it is not 0) and no P (the backward does
// not); a change that differs between two of its keys moves P.
bool alibi_plant_moves_row(const Problem& p, int64_t i, PlantedBug bug) {
  const int64_t first = p.first_key(i), last = p.last_key(i), delta = p.seq_k - p.seq_q;
  if (last < first) return false;
  const bool forward = p.direction == Direction::forward;
  if (bug == PlantedBug::alibi_upper_left) {
    if (delta == 0) return false;
    if (forward) return true;  // lse moves by the common shift at least
    const int64_t lo = std::min(i, i + delta), hi = std::max(i, i + delta);
    return last > first && last > lo && first < hi;
  }
  // alibi_kv_head: the bias scales by the slopes' ratio, over the distances |i + Δ − j|.
  const int64_t pos = i + delta;
  const auto dist = [&](int64_t j) { return j > pos ? j - pos : pos - j; };
  if (forward) return dist(first) != 0 || dist(last) != 0;
  // Two keys at different distances: three keys or more, or two not mirrored around pos.
  return last - first >= 2 || (last == first + 1 && dist(first) != dist(last));
}

// Whether an attn_mask plant moves an output of the dense problem p (its mask and dbias checked
// by planted_bug_cannot_show). The mask's rows i ≡ 3 (mod 8) are fully masked (make_inputs) where
// it has a row per query, and the rest keep each key with probability 0.8: a row's keys under the
// mask are taken to be those of its range. A one-key row has P = 1 and dS = 0 whatever its bias.
//   amask_kv_head: the forward moves a row's lse wherever it sees a key (another bias); the
//     backward moves P, and dS, in a row of two keys or more;
//   dbias_capped: dS of a row of two keys differs from dS ⊙ (1 − tanh²) (tanh² > 0 but at 0);
//   dbias_last_term, dbias_in_dtype: an element of dbias sums two nonzero terms — two batch
//     entries or two heads
//     of a row of two keys (the rows are alike across them), or two rows of two keys sharing a
//     key where the mask broadcasts over the queries.
bool attn_mask_plant_shows(const Problem& p, PlantedBug bug) {
  const auto masked_row = [&](int64_t i) { return p.mask_per_query && i % 8 == 3; };
  const int64_t need = bug == PlantedBug::amask_kv_head && p.direction == Direction::forward ? 1 : 2;
  int64_t prev_last = -1;  // the last key of the previous row of two keys (dbias_last_term)
  for (int64_t i = 0; i < p.seq_q; ++i) {
    if (masked_row(i) || p.keys_of_row(i) < need) continue;
    if (bug != PlantedBug::dbias_last_term && bug != PlantedBug::dbias_in_dtype) return true;
    if ((!p.mask_per_batch && p.batch >= 2) || (!p.mask_per_head && p.heads_q >= 2)) return true;
    if (!p.mask_per_query && prev_last >= p.first_key(i)) return true;
    prev_last = p.last_key(i);
  }
  return false;
}

// Whether a block plant changes the keys of some row: the key block it adds or drops in a query
// block holds a key of a row's range there (a key more or less moves that row's lse and O, or its
// gradients: dV of the key is 0 without the row and P·dO with it).
bool block_plant_shows(const Problem& p, PlantedBug bug) {
  const std::vector<int64_t> bs = block_mask_shape(p);
  const auto reaches = [&](int64_t qb, int64_t kb) {
    for (int64_t i = qb * p.block_q; i < std::min(p.seq_q, qb * p.block_q + p.block_q); ++i)
      if (p.last_key(i) >= std::max(p.first_key(i), kb * p.block_k) &&
          std::min(p.last_key(i), kb * p.block_k + p.block_k - 1) >= p.first_key(i))
        return true;
    return false;
  };
  for (int64_t b = 0; b < bs[0]; ++b)
    for (int64_t h = 0; h < bs[1]; ++h)
      for (int64_t qb = 0; qb < bs[2]; ++qb) {
        int64_t last = -1;
        for (int64_t kb = 0; kb < bs[3]; ++kb) {
          const bool kept = block_kept(p, b, h, qb, kb);
          if (kept) last = kb;
          if (bug == PlantedBug::block_one_past && !kept && kb > 0 && block_kept(p, b, h, qb, kb - 1) &&
              reaches(qb, kb))
            return true;
        }
        if (bug == PlantedBug::block_last_dropped && last >= 0 && reaches(qb, last)) return true;
      }
  return false;
}

// Whether some row of the dense problem s sees other keys when the sequence is taken as sk >= Sk
// keys long (the tail or padding rows read as keys, the lower-right alignment by sk).
bool longer_keys_move(const Problem& s, int64_t sk) {
  if (sk == s.seq_k) return false;
  Problem t = s;
  t.seq_k = sk;
  for (int64_t i = 0; i < s.seq_q; ++i) {
    const int64_t n = s.keys_of_row(i);
    if (t.keys_of_row(i) != n || (n > 0 && t.first_key(i) != s.first_key(i))) return true;
  }
  return false;
}

// The paged bugs on sequence b (its dense problem s, page size ps).
bool paged_bug_shows(const Problem& s, int64_t ps, PlantedBug bug) {
  if (bug == PlantedBug::paged_tail_read) return longer_keys_move(s, (s.seq_k + ps - 1) / ps * ps);
  for (int64_t i = 0; i < s.seq_q; ++i) {
    const int64_t n = s.keys_of_row(i);
    switch (bug) {
      case PlantedBug::paged_page_offset:  // any key seen is read from another page
        if (n > 0) return true;
        break;
      case PlantedBug::splitkv_combine_log2:  // keys in two splits or more
        if (n > 0 && s.first_key(i) / kPagedSplitKeys != s.last_key(i) / kPagedSplitKeys) return true;
        break;
      default: break;
    }
  }
  return false;
}

}  // namespace

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
  if (bug == PlantedBug::none) return "not a planted bug";
  if (contract_violation(p)) return "planted impls run valid problems only";
  const bool varlen_bug = bug == PlantedBug::varlen_key_offset || bug == PlantedBug::varlen_max_alignment ||
                          bug == PlantedBug::varlen_seqused_ignored;
  const bool paged_bug = bug == PlantedBug::paged_page_offset || bug == PlantedBug::paged_tail_read ||
                         bug == PlantedBug::splitkv_combine_log2;
  const bool sink_bug = bug == PlantedBug::sink_lse_omitted || bug == PlantedBug::sink_denominator_omitted ||
                        bug == PlantedBug::dsinks_last_batch || bug == PlantedBug::dsinks_in_dtype;
  if (sink_bug && !p.sinks) return "a sinks bug: the problem has no sinks";
  if (bug == PlantedBug::dsinks_in_dtype && p.direction != Direction::backward) return "dsinks is a backward output";
  if (bug == PlantedBug::dsinks_in_dtype && p.dtype == DType::fp32) return "rounding to fp32 changes nothing in fp32";
  if ((bug == PlantedBug::alibi_upper_left || bug == PlantedBug::alibi_kv_head) && p.alibi == Alibi::none)
    return "an ALiBi bug: the problem has no ALiBi";
  if (bug == PlantedBug::alibi_kv_head && !(p.heads_q > p.heads_kv && p.heads_q >= 2))
    return "without GQA every query head reads its own slope";
  if (bug == PlantedBug::amask_kv_head) {
    if (p.mask_tensor != MaskTensor::additive || !p.mask_per_head) return "needs an additive attn_mask per head";
    if (!(p.heads_q > p.heads_kv && p.heads_q >= 2)) return "without GQA every query head reads its own mask";
  }
  if (bug == PlantedBug::amask_transposed) {
    if (p.mask_tensor == MaskTensor::none) return "needs an attn_mask";
    if (!p.mask_per_query) return "a mask broadcast over the queries ([.., 1, Sk]) has no transpose to read";
    if (p.seq_q != p.seq_k)
      return "a transposed read is defined on a square mask (Sq = Sk); elsewhere it leaves the tensor";
  }
  const bool fp8_bug = bug == PlantedBug::fp8_descale_twice || bug == PlantedBug::fp8_descale_swapped ||
                       bug == PlantedBug::fp8_descale_head0 || bug == PlantedBug::fp8_p_in_e4m3 ||
                       bug == PlantedBug::fp8_out_scale_inverted || bug == PlantedBug::fp8_p_unscaled ||
                       bug == PlantedBug::fp8_out_nonsaturating;
  if (fp8_bug && p.fp8 == Fp8::none) return "an fp8 bug: the problem has no fp8 tensors";
  if (bug == PlantedBug::fp8_p_unscaled && p.fp8 != Fp8::qkv)
    return "the normalised P is cast to Q's fp8 type: the graph needs fp8 q, k, v";
  if (bug == PlantedBug::fp8_descale_head0 && (p.descale != Descale::per_head || p.batch * p.heads_kv < 2))
    return "one descale for every (batch, KV head): entry [0, 0] is each one's";
  if (bug == PlantedBug::fp8_p_in_e4m3 && p.fp8 == Fp8::qkv) return "under fp8 qkv the model's P is e4m3 already";
  if ((bug == PlantedBug::fp8_out_scale_inverted || bug == PlantedBug::fp8_out_nonsaturating) && !p.fp8_out)
    return "O is not fp8: it has no scale";
  const bool block_bug = bug == PlantedBug::block_last_dropped || bug == PlantedBug::block_one_past;
  if (block_bug && !p.block_sparse()) return "a block-sparse bug: the problem has no block mask";
  const bool dbias_bug =
      bug == PlantedBug::dbias_last_term || bug == PlantedBug::dbias_capped || bug == PlantedBug::dbias_in_dtype;
  if (dbias_bug && !p.dbias) return "a dbias bug: the problem has no dbias output";
  if (bug == PlantedBug::dbias_capped && p.softcap <= 0) return "without a softcap its derivative is 1";
  // The plant moves dS′_ij by the factor tanh²(x/c) ≈ (x/c)²: with the inputs' N(0, 1) q and k a
  // row's largest raw scores are about 3σ (σ = scale·√Dqk), and a change must exceed about four
  // roundings of the output (4u) to stand out of its bound: c < 3σ / (2√u).
  if (bug == PlantedBug::dbias_capped && p.dtype != DType::fp32 &&
      p.softcap >= 3 * p.effective_scale() * std::sqrt(static_cast<double>(p.head_dim)) /
                       (2 * std::sqrt(dtype_info(p.dtype).epsilon / 2)))
    return "softcap >= 3σ/(2√u): at the scores' ~3σ, 1 − tanh² is within four output roundings of 1";
  if ((bug == PlantedBug::dbias_last_term || bug == PlantedBug::dbias_in_dtype) && p.mask_per_batch &&
      p.mask_per_head && p.mask_per_query)
    return "the mask broadcasts over no axis: dbias sums nothing";
  if (bug == PlantedBug::dbias_in_dtype && p.dtype == DType::fp32) return "rounding to fp32 changes nothing in fp32";
  if (bug == PlantedBug::dsinks_last_batch) {
    if (p.direction != Direction::backward) return "dsinks is a backward output";
    // A batch entry before the last must add a share: a row that sees a key (D_i = dO_i·O_i, and
    // O_i = 0 without one).
    for (int64_t b = 0; b + 1 < p.batch; ++b) {
      const Problem s = p.sequence(b);
      for (int64_t i = 0; i < s.seq_q; ++i)
        if (s.keys_of_row(i) > 0) return "";
    }
    return "no batch entry before the last has a row that sees a key: the last one's share is the whole sum";
  }
  if (bug == PlantedBug::batch_variant_tiles || bug == PlantedBug::packed_variant_tiles) {
    // The tiles differ only for a row of more keys than the small tile; whether its rescalings
    // then change a byte is the case's data (the impl's blind_spot derives it). batch_size runs
    // entry 0 alone, so its rows decide; packing moves every entry, all of one size.
    if (p.direction != Direction::forward) return "the variant tiles are planted in the forward";
    if (bug == PlantedBug::batch_variant_tiles && p.paged())
      return "the paged layout's sequences share one KV cache: --invariance does not cut it";
    if (bug == PlantedBug::batch_variant_tiles && p.batch < 2)
      return "a batch of one entry: no smaller batch to run an entry in";
    if (bug == PlantedBug::packed_variant_tiles)
      if (const std::string why = packing_uncut(p); !why.empty()) return why;
    const Problem first = p.sequence(0);
    for (int64_t i = 0; i < first.seq_q; ++i)
      if (first.keys_of_row(i) > kBatchVariantTile) return "";
    return "no row of batch entry 0 sees more than " + std::to_string(kBatchVariantTile) +
           " keys: the tiles are the same";
  }
  if (varlen_bug && !p.varlen()) return "a varlen bug: the problem is not varlen";
  if (paged_bug && !p.paged()) return "a paged KV cache bug: the problem is not paged";
  if (bug == PlantedBug::fp8_descale_head0 && p.packed() && p.descale == Descale::per_head) {
    // Entry [0, 0] read for every (sequence, KV head): it shows wherever another entry's descale
    // differs from it (fp8_descale's per-entry factor) and a row of that sequence sees a key.
    for (int64_t b = 0; b < p.batch; ++b) {
      const Problem s = p.sequence(b);
      bool sees = false;
      for (int64_t i = 0; i < s.seq_q && !sees; ++i) sees = s.keys_of_row(i) > 0;
      for (int64_t hk = 0; sees && hk < p.heads_kv; ++hk)
        for (const char t : {'q', 'k', 'v'})
          if ((t != 'q' || p.fp8 == Fp8::qkv) && fp8_descale(p, t, b, hk) != fp8_descale(p, t, 0, 0)) return "";
    }
    return "every (sequence, KV head) whose rows see a key has entry [0, 0]'s descales";
  }
  if (p.packed()) {
    // Each sequence is a dense problem: the bug shows where it shows in one of them.
    const std::vector<int64_t> cu_k = cu_seqlens_k(p);
    std::string why = "no sequence", first;  // first: sequence 0's reason, when every one gives it
    bool same = true;
    for (int64_t b = 0; b < p.batch; ++b) {
      if (bug == PlantedBug::varlen_seqused_ignored) {
        if (longer_keys_move(p.sequence(b), p.seqlens_k[b] + p.pad_k)) return "";
        continue;
      }
      if (varlen_bug) {
        if (p.seqlens_q[b] > 0 && varlen_bug_moves_keys(p, b, cu_k[b], bug)) return "";
        continue;
      }
      if (paged_bug) {
        if (paged_bug_shows(p.sequence(b), p.page_size, bug)) return "";
        continue;
      }
      const std::string w = planted_bug_cannot_show(p.sequence(b), bug);
      if (w.empty()) return "";
      if (b == 0) first = w, why = "no sequence can show it (sequence 0: " + w + ")";
      same = same && w == first;
    }
    if (!varlen_bug && !paged_bug && same && p.batch > 0) return first;  // not about one sequence
    if (bug == PlantedBug::varlen_seqused_ignored)
      return p.pad_k == 0 ? "no padding rows: seqused_k is not an input"
                          : "no row's keys move when a sequence's padding rows are read as keys";
    if (varlen_bug)
      return bug == PlantedBug::varlen_key_offset
                 ? "no row of a sequence after the first sees its first key"
                 : "no sequence's alignment or window moves with max_seqlen_k - max_seqlen_q";
    if (bug == PlantedBug::paged_page_offset) return "no row sees a key";
    if (bug == PlantedBug::paged_tail_read) return "no row's keys move when a last page is read whole";
    if (bug == PlantedBug::splitkv_combine_log2) return "no row sees keys of two splits";
    return why;
  }
  // Rows without keys are masked_row_nan's whole point, Sk = 0 included (every row then is one).
  if (p.batch == 0 || p.seq_q == 0 || (p.seq_k == 0 && bug != PlantedBug::masked_row_nan))
    return "empty problem: nothing to get wrong";
  bool any_key = false;
  for (int64_t i = 0; i < p.seq_q && !any_key; ++i) any_key = p.keys_of_row(i) > 0;
  // The chunk and window plants can give a key to a row that has none (its range ends just left of
  // its chunk or its window).
  if (!any_key && bug != PlantedBug::masked_row_nan && bug != PlantedBug::chunk_off_by_one &&
      bug != PlantedBug::window_off_by_one)
    return "no row sees a key: nothing to get wrong";
  switch (bug) {
    case PlantedBug::window_off_by_one:
      // The plant starts row i's window one key early, at w − 1 (w = i + Sk − Sq − left): it adds
      // that key exactly when it is a key (>= 0), inside the row's chunk and not past the row's last
      // key — also for a row whose own range is empty (its last key is w − 1). A window start that
      // a chunk overrides, or that sits at key 0, moves nothing.
      for (int64_t i = 0; p.window_left >= 0 && i < p.seq_q; ++i) {
        const int64_t key = i + p.seq_k - p.seq_q - p.window_left - 1;
        if (key >= (p.chunk > 0 ? chunk_start(p, i) : 0) && key <= p.last_key(i)) return "";
      }
      return p.window_left >= 0 ? "no row has a key just left of its window within its causal range and chunk"
                                : "no left window";
    case PlantedBug::chunk_off_by_one:
      // The plant starts row i at c − 1 (c its chunk's first key) where the window allows: it adds
      // key c − 1 exactly when c > 0, c − 1 is inside the window's left bound and not past the
      // row's last key — also for a row whose own range is empty (its last key is c − 1).
      for (int64_t i = 0; p.chunk > 0 && i < p.seq_q; ++i) {
        const int64_t c = chunk_start(p, i), pos = i + p.seq_k - p.seq_q;
        const int64_t window = p.window_left < 0 ? 0 : std::max<int64_t>(0, pos - p.window_left);
        if (c > 0 && c - 1 >= window && c - 1 < p.seq_k && p.last_key(i) >= c - 1) return "";
      }
      return p.chunk > 0
                 ? "no row's chunk starts inside its window and causal range: the key before it is never in reach"
                 : "no chunk: chunked-local attention is off";
    case PlantedBug::gqa_modulo:
      if (p.heads_kv > 1 && p.heads_q > p.heads_kv) return "";
      return "h % Hkv equals h / (Hq / Hkv) without GQA or with one KV head";
    case PlantedBug::drop_rowsum:
      if (p.direction == Direction::backward) return "";
      return "the rowsum term is a backward bug";
    case PlantedBug::masked_row_nan:
      if (p.direction != Direction::forward) return "the NaN row is planted in the forward";
      // rows i = 3 (mod 8) see nothing where the mask has a row per query; query block 2 reads no
      // key block
      if (p.mask_tensor != MaskTensor::none && p.mask_per_query && p.seq_q > 3) return "";
      if (p.block_sparse() && p.seq_q > 2 * p.block_q) return "";
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (p.keys_of_row(i) == 0) return "";
      return "every row sees a key";
    case PlantedBug::pv_in_dtype:
    case PlantedBug::rowsum_in_dtype:
    case PlantedBug::lse_plus_log2: {
      if (p.direction != Direction::forward) return "the precision bugs are planted in the forward";
      if (bug == PlantedBug::lse_plus_log2) return "";
      if (p.dtype == DType::fp32) return "rounding to the dtype changes nothing in fp32";
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (p.keys_of_row(i) >= kPlantedPrecisionKeys) return "";
      return "every row sees one key: P = l = 1 and P·v = v are exact in the dtype";
    }
    case PlantedBug::varlen_key_offset:
    case PlantedBug::varlen_max_alignment:
    case PlantedBug::varlen_seqused_ignored:
    case PlantedBug::paged_page_offset:
    case PlantedBug::paged_tail_read:
    case PlantedBug::splitkv_combine_log2:
    case PlantedBug::dsinks_last_batch:
    case PlantedBug::none: break;
    // Every 16-bit backward with a row that sees a key: each rounding of the running sum moves it
    // whether or not the bound sees it (an XPASS is the bound's blind spot, never a SKIP).
    case PlantedBug::dsinks_in_dtype: return "";
    case PlantedBug::alibi_upper_left:
    case PlantedBug::alibi_kv_head:
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (alibi_plant_moves_row(p, i, bug)) return "";
      if (bug == PlantedBug::alibi_upper_left && p.seq_q == p.seq_k) return "Sq = Sk: the two diagonals are one";
      return "no row's keys change relative to each other, nor (forward) its lse";
    case PlantedBug::sink_lse_omitted: return "";  // every row with a key: lse lacks −ln(1 − P_s)
    case PlantedBug::sink_denominator_omitted:
      return "";  // every row with a key: O too large by 1 / (1 − P_s), and D = dO·O with it
    // Row i reads (j, i) for each key j of its range: an element other than its own wherever j ≠ i
    // (the inputs' masks are not symmetric: N(0, 1) values, and keys kept at random with rows
    // i ≡ 3 (mod 8) dropped whole). Whether the case's own mask gives other bytes, the backward's
    // one-key rows among them, is the impl's blind_spot.
    case PlantedBug::amask_transposed:
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (p.keys_of_row(i) > 1 || (p.keys_of_row(i) == 1 && p.first_key(i) != i)) return "";
      return "no row sees a key off the diagonal: the transposed read is the same element";
    // A descale off by a factor of 3/4 to 4/3 or more (fp8_descale) rescales a row's scores (its lse
    // moves, and its P unless it has one key) or its O: every row with a key shows it; head0 every
    // row of a (batch, KV head) after the first, whose factor differs from entry [0, 0]'s.
    case PlantedBug::fp8_descale_twice:
    case PlantedBug::fp8_descale_swapped:
    case PlantedBug::fp8_descale_head0: return "";
    // O·40 against O/40: every row with a key whose O is not 0 (the inputs' O is nowhere 0).
    case PlantedBug::fp8_out_scale_inverted: return "";
    // Data-dependent: it shows where some O·o_scale rounds past 448; where none does it changes no
    // byte, which its blind spot measures (never a SKIP that could hide one).
    case PlantedBug::fp8_out_nonsaturating: return "";
    case PlantedBug::batch_variant_tiles:
    case PlantedBug::packed_variant_tiles: break;  // above, before the packed layouts' sequences
    case PlantedBug::fp8_p_in_e4m3:
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (p.keys_of_row(i) >= kPlantedPrecisionKeys) return "";
      return "every row sees one key: P = 1 is exact in e4m3";
    // A row of one key has P = 1, scaled or not a code; with a sink its P = e/l < 1 moves.
    case PlantedBug::fp8_p_unscaled:
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (p.keys_of_row(i) >= kPlantedPrecisionKeys || (p.sinks && p.keys_of_row(i) == 1)) return "";
      return "every row sees one key and no sink: P = 1 is exact scaled or not";
    case PlantedBug::block_last_dropped:
    case PlantedBug::block_one_past:
      if (block_plant_shows(p, bug)) return "";
      return "no row sees a key of a block the plant adds or drops";
    case PlantedBug::amask_kv_head:
    case PlantedBug::dbias_last_term:
    case PlantedBug::dbias_in_dtype:
    case PlantedBug::dbias_capped:
      if (attn_mask_plant_shows(p, bug)) return "";
      return p.direction == Direction::forward
                 ? "no row sees a key outside the fully masked rows"
                 : "no two terms of a dbias element (or no row of two keys) to tell apart";
  }
  return "not a planted bug";
}

}  // namespace opcts::sdpa
