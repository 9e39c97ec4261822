// host.flash on a paged KV cache, as FlashAttention's flash_attn_with_kvcache indexes one: the
// queries packed by cu_seqlens_q, sequence b's key j at slot j % page_size of page
// block_table[b][j / page_size] (k_cache, v_cache in NHD or HND pages), seqused_k[b] keys; all
// three read from the inputs and checked, a page index outside the cache or a length past the
// table refused by name. Each sequence runs as split-KV, as decode kernels do (FlashAttention's
// num_splits, FlashInfer's split-k): its keys in splits of kPagedSplitKeys, each split's O in
// fp32 with its logsumexp, combined as O = Σ_s e^(lse_s − m)·O_s / Σ_s e^(lse_s − m) and
// lse = m + ln Σ_s e^(lse_s − m), m = max_s lse_s; sinks join that sum once, e^(sink − m), not the
// splits' (a row of no key in any split: O = 0, lse = sink).
//
// The planted paged bugs (host.flash_paged_*, host.flash_splitkv_*): page_offset reads page
// block_table[b][j / page_size] + 1; tail_read takes each sequence's whole last page as keys;
// combine_log2 combines with 2^x and log2 where the logsumexps are natural logs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/errors.hpp"
#include "families/sdpa/host/sdpa_flash.hpp"
#include "families/sdpa/host/sdpa_packed.hpp"

namespace opcts::host_sdpa {

namespace {

// The checked block table and lengths.
struct Pages {
  int64_t width = 0, num_pages = 0;
  std::vector<int64_t> table, used;
};

Pages read_pages(const sdpa::Problem& p, const TensorMap& in, const HostTensor& cache) {
  Pages g;
  const HostTensor& t = in.at("block_table");
  if (t.dtype() != DType::int32 || t.shape().size() != 2 || t.dim(0) != p.batch)
    throw InvalidArgument("block_table", "must be int32 [batch, max_pages_per_seq]");
  g.width = t.dim(1);
  g.num_pages = cache.dim(0);
  for (int64_t e = 0; e < t.numel(); ++e) g.table.push_back(static_cast<int64_t>(t.get(e)));
  g.used = read_seqused_k(in.at("seqused_k"), std::vector<int64_t>(static_cast<size_t>(p.batch), g.width * p.page_size),
                          "its table");
  return g;
}

// Sequence b's first `n` keys (or values) gathered from `cache` as a [1, n, Hkv, dim] tensor.
HostTensor gather(const sdpa::Problem& p, const Pages& g, const HostTensor& cache, int64_t b, int64_t n, int64_t dim,
                  Plant plant) {
  HostTensor s(cache.dtype(), {1, n, p.heads_kv, dim});
  for (int64_t j = 0; j < n; ++j) {
    int64_t page = g.table[b * g.width + j / p.page_size];
    if (page < 0 || page >= g.num_pages)
      throw InvalidArgument("block_table", "sequence " + std::to_string(b) + " page " +
                                               std::to_string(j / p.page_size) + " is " + std::to_string(page) +
                                               ", outside the cache's " + std::to_string(g.num_pages) + " pages");
    if (plant == Plant::paged_page_offset) page = (page + 1) % g.num_pages;
    const int64_t slot = j % p.page_size;
    for (int64_t h = 0; h < p.heads_kv; ++h)
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t at = p.kv_layout == sdpa::KvLayout::hnd
                               ? ((page * p.heads_kv + h) * p.page_size + slot) * dim + d
                               : ((page * p.page_size + slot) * p.heads_kv + h) * dim + d;
        s.set_code((j * p.heads_kv + h) * dim + d, cache.code(at));
      }
  }
  return s;
}

}  // namespace

TensorMap flash_run_paged(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded) {
  const HostTensor &q = in.at("q"), &kc = in.at("k_cache"), &vc = in.at("v_cache");
  const int64_t B = p.batch, Hq = p.heads_q, Dv = p.head_dim_v, Tq = q.dim(0);
  const std::vector<int64_t> cu_q = read_cu_seqlens(in, "cu_seqlens_q", B, Tq);
  const Pages g = read_pages(p, in, kc);
  const bool paged_plant =
      plant == Plant::paged_page_offset || plant == Plant::paged_tail_read || plant == Plant::splitkv_combine_log2;
  const Plant dense_plant = paged_plant ? Plant::none : plant;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  TensorMap out;
  HostTensor& o = out.emplace("O", HostTensor(unrounded ? DType::fp32 : p.dtype, {Tq, Hq, Dv})).first->second;
  HostTensor& lse = out.emplace("lse", HostTensor(DType::fp32, {Hq, Tq})).first->second;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t q0 = cu_q[b], lq = cu_q[b + 1] - cu_q[b];
    int64_t lk = g.used[b];
    if (plant == Plant::paged_tail_read) lk = (lk + p.page_size - 1) / p.page_size * p.page_size;
    const sdpa::Problem s = dense_sequence(p, lq, lk);
    TensorMap sin;
    sin.emplace("q", rows_of(q, q0, lq));
    sin.emplace("k", gather(p, g, kc, b, lk, p.head_dim, plant));
    sin.emplace("v", gather(p, g, vc, b, lk, p.head_dim_v, plant));
    add_sequence_extras(p, in, b, sin, plant == Plant::fp8_descale_head0 ? 0 : b);
    const int64_t splits = std::max<int64_t>(1, (lk + sdpa::kPagedSplitKeys - 1) / sdpa::kPagedSplitKeys);
    if (splits == 1) {
      DenseOptions opt;
      opt.unrounded = unrounded;
      const TensorMap r = flash_run_dense(s, sin, dense_plant, opt);
      put_rows(o, r.at("O"), q0, 0);
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < lq; ++i) lse.set(h * Tq + q0 + i, r.at("lse").get(h * lq + i));
      continue;
    }
    std::vector<TensorMap> part;
    for (int64_t sp = 0; sp < splits; ++sp) {
      DenseOptions opt;
      opt.key_begin = sp * sdpa::kPagedSplitKeys;
      opt.key_end = std::min(lk, opt.key_begin + sdpa::kPagedSplitKeys);
      opt.unrounded = true;
      opt.without_sinks = true;
      part.push_back(flash_run_dense(s, sin, dense_plant, opt));
    }
    const bool log2 = plant == Plant::splitkv_combine_log2;
    std::vector<float> w(static_cast<size_t>(splits)), acc(static_cast<size_t>(Dv));
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t h = 0; h < Hq; ++h) {
        float m = kNegInf;
        for (int64_t sp = 0; sp < splits; ++sp) m = std::max(m, static_cast<float>(part[sp].at("lse").get(h * lq + i)));
        const int64_t row = ((q0 + i) * Hq + h) * Dv;
        const float sink = p.sinks ? static_cast<float>(in.at("sinks").get(h)) : kNegInf;
        if (m == kNegInf) {  // no key in any split: the kernel's own empty row (O = 0), lse = -inf or the sink
          for (int64_t d = 0; d < Dv; ++d) o.set(row + d, part[0].at("O").get((i * Hq + h) * Dv + d));
          lse.set(h * Tq + q0 + i, sink);
          continue;
        }
        float l = 0;
        for (int64_t sp = 0; sp < splits; ++sp) {
          const auto x = static_cast<float>(part[sp].at("lse").get(h * lq + i)) - m;
          w[sp] = log2 ? std::exp2(x) : std::exp(x);
          l += w[sp];
        }
        const float l_keys = l;
        if (p.sinks) l += log2 ? std::exp2(sink - m) : std::exp(sink - m);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t sp = 0; sp < splits; ++sp) {
          if (w[sp] == 0) continue;
          const HostTensor& os = part[sp].at("O");  // [1, lq, Hq, Dv] fp32
          for (int64_t d = 0; d < Dv; ++d) acc[d] += w[sp] * static_cast<float>(os.get((i * Hq + h) * Dv + d));
        }
        const float l_o = plant == Plant::sink_denominator_omitted ? l_keys : l;
        for (int64_t d = 0; d < Dv; ++d) o.set(row + d, acc[d] / l_o);
        const float l_lse = plant == Plant::sink_lse_omitted ? l_keys : l;
        lse.set(h * Tq + q0 + i, m + (log2 ? std::log2(l_lse) : std::log(l_lse)));
      }
  }
  return out;
}

}  // namespace opcts::host_sdpa
