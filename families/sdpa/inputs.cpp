// sdpa inputs: q, k, v (and dO) N(0, 1) in the problem's dtype and layout, the attn_mask by the boolean rule, and NaN
// in the keys and values no query sees where the problem poisons them and in a varlen problem's
// padding rows (sdpa.hpp, "Inputs").
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "families/sdpa/sdpa.hpp"
#include "numerics/rng.hpp"

namespace opcts::sdpa {

namespace {

// The fp8 codes' σ (sdpa.hpp, "Inputs"): 48·z reaches e4m3fn's 448 only past 9σ.
constexpr double kFp8CodeSigma = 48;

// The boolean rule of the attn_mask inputs (sdpa.hpp): row i ≡ 3 (mod 8) fully masked, every
// other element kept with probability 0.8, element e of the mask tensor drawing stream 4.
bool mask_keeps(uint64_t seed, int64_t e, int64_t row) { return row % 8 != 3 && uniform01(seed, 4, e) < 0.8; }

HostTensor int32_tensor(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  HostTensor t(DType::int32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return t;
}

// corrupt: cu_seqlens_q / cu_seqlens_k: entry 1 one past entry 2, so sequence 1 ends before it
// starts (Problem::validate asks for two sequences).
void corrupt_cu_seqlens(const Problem& p, TensorMap& in) {
  const char* name = p.corrupt == Corrupt::cu_seqlens_q   ? "cu_seqlens_q"
                     : p.corrupt == Corrupt::cu_seqlens_k ? "cu_seqlens_k"
                                                          : nullptr;
  if (!name) return;
  HostTensor& cu = in.at(name);
  cu.set(1, cu.get(2) + 1);
}

// The paged layout's inputs: q and cu_seqlens_q as varlen; k_cache and v_cache N(0, 1) with NaN
// in every slot no sequence's key is in (pages no sequence owns, the tail of each last page) and,
// with poison_masked, in each sequence's unseen keys; block_table from a seeded permutation of
// the pages (Fisher–Yates on stream 6), the shared prefix's pages in every sequence's first
// entries, each sequence's unused entries pointing at an unowned page; seqused_k the key
// counts. A shared page holds one sequence's keys for all: the prefix is the same tokens.
TensorMap make_paged_inputs(const Problem& p, uint64_t seed) {
  const PagedGeometry g = paged_geometry(p);
  TensorMap in;
  in.emplace("q", HostTensor(p.q_dtype(), q_shape(p)));
  fill_normal(in.at("q"), seed, 0, p.fp8 == Fp8::qkv ? kFp8CodeSigma : 1.0);
  HostTensor& kc = in.emplace("k_cache", HostTensor(p.kv_dtype(), k_shape(p))).first->second;
  HostTensor& vc = in.emplace("v_cache", HostTensor(p.kv_dtype(), v_shape(p))).first->second;
  fill_normal(kc, seed, 1, p.fp8 != Fp8::none ? kFp8CodeSigma : 1.0);
  fill_normal(vc, seed, 2, p.fp8 != Fp8::none ? kFp8CodeSigma : 1.0);
  std::vector<int64_t> perm(static_cast<size_t>(g.num_pages));
  for (int64_t i = 0; i < g.num_pages; ++i) perm[i] = i;
  for (int64_t i = g.num_pages - 1; i > 0; --i)
    std::swap(perm[i], perm[static_cast<int64_t>(uniform01(seed, 6, static_cast<uint64_t>(i)) * (i + 1))]);
  std::vector<char> holds(static_cast<size_t>(g.num_pages * p.page_size), 0);  // slot holds a seen key
  std::vector<int64_t> table(static_cast<size_t>(p.batch * g.max_pages_per_seq), perm[g.num_pages - 1]);
  // The shared prefix's pages are dealt first, once, and every sequence's table starts with them.
  int64_t next = g.shared;
  for (int64_t b = 0; b < p.batch; ++b) {
    const auto unseen = p.poison_masked ? unseen_keys(p.sequence(b)) : std::vector<char>();
    for (int64_t j = 0; j < g.pages[b]; ++j) table[b * g.max_pages_per_seq + j] = j < g.shared ? perm[j] : perm[next++];
    for (int64_t j = 0; j < p.seqlens_k[b]; ++j)
      if (unseen.empty() || !unseen[j])
        holds[table[b * g.max_pages_per_seq + j / p.page_size] * p.page_size + j % p.page_size] = 1;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t page = 0; page < g.num_pages; ++page)
    for (int64_t slot = 0; slot < p.page_size; ++slot) {
      if (holds[page * p.page_size + slot]) continue;
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        for (int64_t d = 0; d < p.head_dim; ++d) kc.set(cache_index(p, page, slot, h, d, p.head_dim), nan);
        for (int64_t d = 0; d < p.head_dim_v; ++d) vc.set(cache_index(p, page, slot, h, d, p.head_dim_v), nan);
      }
    }
  if (p.corrupt == Corrupt::block_table)  // the first entry in use points past the cache
    for (int64_t b = 0; b < p.batch; ++b)
      if (g.pages[b] > 0) {
        table[b * g.max_pages_per_seq] = g.num_pages;
        break;
      }
  std::vector<int64_t> used = p.seqlens_k;
  if (p.corrupt == Corrupt::seqused_k) used[0] = g.max_pages_per_seq * p.page_size + 1;
  in.emplace("block_table", int32_tensor(table, {p.batch, g.max_pages_per_seq}));
  in.emplace("cu_seqlens_q", int32_tensor(cu_seqlens(p.seqlens_q), {p.batch + 1}));
  in.emplace("seqused_k", int32_tensor(used, {p.batch}));
  corrupt_cu_seqlens(p, in);
  return in;
}

// The sinks input (sdpa.hpp, "Inputs"): fp32 [Hq], c + N(0, 2²) on stream 7, c the log of a row's
// typical denominator, so that P_sink = 1/(1 + e^(c − sink)) ranges from a sink that barely counts
// to one that holds nearly all of a row's weight whatever the scores' spread. Scores of n keys
// with N(0, 1) q and k are about N(0, σ²), σ = scale·√Dqk (at most the softcap): ln Σ_j e^(s_j) is
// about ln n + σ²/2 (the lognormal mean) while σ² <= 2 ln n, and about the largest score,
// σ·√(2 ln n), past it (the two agree at σ² = 2 ln n).
void add_sinks(const Problem& p, uint64_t seed, TensorMap& in) {
  if (!p.sinks) return;
  HostTensor s(DType::fp32, {p.heads_q});
  fill_normal(s, seed, 7, 2.0);
  const double ln_n = std::log(static_cast<double>(std::max<int64_t>(p.seq_k, 1)));
  double sigma = p.effective_scale() * std::sqrt(static_cast<double>(p.head_dim));
  if (p.softcap > 0) sigma = std::min(sigma, p.softcap);
  const double center = sigma * sigma <= 2 * ln_n ? ln_n + sigma * sigma / 2 : sigma * std::sqrt(2 * ln_n);
  for (int64_t h = 0; h < p.heads_q; ++h) s.set(h, s.get(h) + center);
  in.emplace("sinks", std::move(s));
}

}  // namespace

namespace {

TensorMap tensor_inputs(const Problem& p, uint64_t seed) {
  if (p.paged()) return make_paged_inputs(p, seed);
  TensorMap in;
  in.emplace("q", HostTensor(p.q_dtype(), q_shape(p)));
  in.emplace("k", HostTensor(p.kv_dtype(), k_shape(p)));
  in.emplace("v", HostTensor(p.kv_dtype(), v_shape(p)));
  // Standard normal q, k, v: with the default scale the scores are about N(0, 1), as in
  // trained models' attention, and V rows of unit size keep O's error visible. fp8 codes are
  // 48·z (their descales bring the values back near unit size).
  const double q_sigma = p.fp8 == Fp8::qkv ? kFp8CodeSigma : 1.0, kv_sigma = p.fp8 != Fp8::none ? kFp8CodeSigma : 1.0;
  fill_normal(in.at("q"), seed, 0, q_sigma);
  fill_normal(in.at("k"), seed, 1, kv_sigma);
  fill_normal(in.at("v"), seed, 2, kv_sigma);
  if (p.direction == Direction::backward) {
    in.emplace("dO", HostTensor(p.dtype, o_shape(p)));
    fill_normal(in.at("dO"), seed, 3, 1.0);
  }
  if (p.mask_tensor != MaskTensor::none) {
    const bool boolean = p.mask_tensor == MaskTensor::boolean;
    HostTensor m(boolean ? DType::bool8 : p.dtype, mask_shape(p));
    if (!boolean) fill_normal(m, seed, 5, 1.0);
    const int64_t n = m.numel();
    for (int64_t e = 0; e < n; ++e) {
      // The mask's own row (one row, 0, where it broadcasts over the queries).
      const int64_t row = (e / std::max<int64_t>(p.seq_k, 1)) % std::max<int64_t>(mask_shape(p)[2], 1);
      const bool keep = mask_keeps(seed, e, row);
      if (boolean) m.set(e, keep ? 1.0 : 0.0);
      else if (!keep) m.set(e, -std::numeric_limits<double>::infinity());
    }
    in.emplace("attn_mask", std::move(m));
  }
  if (p.block_sparse()) {
    HostTensor bm(DType::bool8, block_mask_shape(p));
    const std::vector<int64_t> bs = block_mask_shape(p);
    for (int64_t e = 0; e < bm.numel(); ++e)
      bm.set(e, block_kept(p, e / (bs[1] * bs[2] * bs[3]), e / (bs[2] * bs[3]) % bs[1], e / bs[3] % bs[2], e % bs[3])
                    ? 1.0
                    : 0.0);
    in.emplace("block_mask", std::move(bm));
  }
  // A varlen sequence's keys are packed rows cu_seqlens_k[b] + j (ks.batch is 0 there), its
  // padding rows (pad_k) the pad_k after them.
  const std::vector<int64_t> cu_k = p.varlen() ? cu_seqlens_k(p) : std::vector<int64_t>();
  if (p.varlen()) {
    in.emplace("cu_seqlens_q", int32_tensor(cu_seqlens(p.seqlens_q), {p.batch + 1}));
    in.emplace("cu_seqlens_k", int32_tensor(cu_k, {p.batch + 1}));
    corrupt_cu_seqlens(p, in);
    if (p.pad_k > 0) {
      std::vector<int64_t> used = p.seqlens_k;
      if (p.corrupt == Corrupt::seqused_k) used[0] = p.seqlens_k[0] + p.pad_k + 1;  // past its segment
      in.emplace("seqused_k", int32_tensor(used, {p.batch}));
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Strides ks = k_strides(p), vs = v_strides(p);
  const auto poison_row = [&](int64_t b, int64_t row) {
    for (int64_t h = 0; h < p.heads_kv; ++h) {
      for (int64_t d = 0; d < p.head_dim; ++d) in.at("k").set(ks.at(b, h, row) + d, nan);
      for (int64_t d = 0; d < p.head_dim_v; ++d) in.at("v").set(vs.at(b, h, row) + d, nan);
    }
  };
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t row0 = p.varlen() ? cu_k[b] : 0;
    if (p.poison_masked || p.block_sparse()) {
      // A dense problem's unseen keys are every batch entry's (its block mask varies with them).
      const auto unseen = unseen_keys(p.packed() ? p.sequence(b) : p);
      for (size_t j = 0; j < unseen.size(); ++j)
        if (unseen[j]) poison_row(b, row0 + static_cast<int64_t>(j));
    }
    if (p.varlen())
      for (int64_t j = p.seqlens_k[b]; j < p.seqlens_k[b] + p.pad_k; ++j) poison_row(b, row0 + j);
  }
  return in;
}

// The ALiBi slopes (sdpa.hpp, "Inputs"): BLOOM's and MPT's geometric sequence 2^(−8(h + 1)/Hq),
// times (1 + b/2) for batch entry b when per (batch, head), so that a slope read from the wrong
// head or entry is another value.
void add_alibi(const Problem& p, TensorMap& in) {
  if (p.alibi == Alibi::none) return;
  const bool per_batch = p.alibi == Alibi::per_batch_head;
  const int64_t rows = per_batch ? p.batch : 1;
  HostTensor s(DType::fp32, per_batch ? std::vector<int64_t>{p.batch, p.heads_q} : std::vector<int64_t>{p.heads_q});
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      s.set(b * p.heads_q + h, std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(p.heads_q)) *
                                   (per_batch ? 1.0 + 0.5 * static_cast<double>(b) : 1.0));
  in.emplace("alibi_slopes", std::move(s));
}

// The fp8 descales (sdpa.hpp, fp8_descale): fp32 descale_shape(p) per fp8 tensor.
void add_descales(const Problem& p, TensorMap& in) {
  if (p.fp8 == Fp8::none) return;
  const std::vector<int64_t> shape = descale_shape(p);
  const int64_t rows = shape.size() == 2 ? p.batch : 1, heads = shape.size() == 2 ? p.heads_kv : 1;
  for (const char t : {'q', 'k', 'v'}) {
    if (t == 'q' && p.fp8 != Fp8::qkv) continue;
    HostTensor d(DType::fp32, shape);
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t h = 0; h < heads; ++h) d.set(b * heads + h, fp8_descale(p, t, b, h));
    in.emplace(std::string(1, t) + "_descale", std::move(d));
  }
  if (p.fp8_out) {
    HostTensor s(DType::fp32, {1});
    s.set(0, static_cast<double>(p.fp8_out_scale));
    in.emplace("o_scale", std::move(s));
  }
}

}  // namespace

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  TensorMap in = tensor_inputs(p, seed);
  add_sinks(p, seed, in);
  add_alibi(p, in);
  add_descales(p, in);
  return in;
}

}  // namespace opcts::sdpa
