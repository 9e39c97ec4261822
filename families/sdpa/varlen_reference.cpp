// The varlen and paged references: each sequence is the dense problem Problem::sequence(b)
// (batch 1, BSHD: its packed THD rows are exactly that tensor; a paged sequence's keys are
// gathered from its pages by the block table), so its references are the dense ones
// (reference.cpp, backward_reference.cpp) on its rows of the inputs, placed back at its rows of
// the outputs. Cost: the sequences' own, proportional to the query–key pairs each sees; no
// sequence reads another's rows, so the references cannot share a boundary bug with an impl.
//
// The error-energy checks join as one block-diagonal form: the sequences' roundings are
// independent, so traces and squared traces add, the spectral bound is the largest, the fixed
// parts (disjoint elements) add in squares, and the weights take their elements' places.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

namespace {

// Where sequence b's rows sit in the packed outputs: query-side tensors (O, lse, dQ) from token
// q0 of tq, key-side ones (dK, dV) from token k0.
struct Place {
  const Problem* p;
  int64_t q0, k0, tq, sq;
};

// The packed size of output `base` ("O", "lse", "dQ", "dK", "dV") and where sub-element e of a
// sequence's dense output goes.
int64_t packed_size(const Problem& p, const std::string& base) {
  if (base == "O") return p.total_q() * p.heads_q * p.head_dim_v;
  if (base == "lse") return p.heads_q * p.total_q();
  if (base == "dQ") return p.total_q() * p.heads_q * p.head_dim;
  if (base == "dK") return p.total_k() * p.heads_kv * p.head_dim;
  if (base == "dV") return p.total_k() * p.heads_kv * p.head_dim_v;
  throw std::logic_error("sdpa varlen reference: no packed form for output '" + base + "'");
}

int64_t packed_index(const Place& at, const std::string& base, int64_t e) {
  const Problem& p = *at.p;
  if (base == "lse") return (e / at.sq) * at.tq + at.q0 + e % at.sq;  // [Hq, Sq_b] into [Hq, Tq]
  if (base == "O") return at.q0 * p.heads_q * p.head_dim_v + e;
  if (base == "dQ") return at.q0 * p.heads_q * p.head_dim + e;
  if (base == "dK") return at.k0 * p.heads_kv * p.head_dim + e;
  return at.k0 * p.heads_kv * p.head_dim_v + e;  // dV
}

std::string base_of(const std::string& key) { return key.substr(0, key.find('@')); }

void place(const Problem& p, const Place& at, const std::map<std::string, std::vector<double>>& from,
           std::map<std::string, std::vector<double>>& to) {
  for (const auto& [key, values] : from) {
    const std::string base = base_of(key);
    auto [it, fresh] = to.try_emplace(key);
    if (fresh) it->second.assign(static_cast<size_t>(packed_size(p, base)), 0.0);
    for (size_t e = 0; e < values.size(); ++e) it->second[packed_index(at, base, static_cast<int64_t>(e))] = values[e];
  }
}

void join_energy(const Problem& p, const Place& at, const std::map<std::string, ErrorEnergy>& from,
                 std::map<std::string, ErrorEnergy>& to) {
  for (const auto& [key, e] : from) {
    const std::string base = base_of(key);
    auto [it, fresh] = to.try_emplace(key);
    ErrorEnergy& total = it->second;
    if (fresh) total.weight.assign(static_cast<size_t>(packed_size(p, base)), 0.0);
    if (total.sources.size() < e.sources.size()) total.sources.resize(e.sources.size());
    for (size_t s = 0; s < e.sources.size(); ++s) {
      total.sources[s].trace += e.sources[s].trace;
      total.sources[s].trace_sq += e.sources[s].trace_sq;
      total.sources[s].spectral = std::max(total.sources[s].spectral, e.sources[s].spectral);
    }
    total.fixed = std::hypot(total.fixed, e.fixed);
    for (size_t i = 0; i < e.weight.size(); ++i)
      total.weight[packed_index(at, base, static_cast<int64_t>(i))] = e.weight[i];
  }
}

// The dense problem of a sequence of no query and no key, for a batch of none.
Problem empty_sequence(const Problem& p) {
  Problem one = p;
  one.batch = 1;
  one.seqlens_q = one.seqlens_k = {0};
  one.shared_prefix = 0;
  return one.sequence(0);
}

// Sequence b's keys (or values) from a paged cache: token j at slot j % page_size of page
// block_table[b][j / page_size], as a [1, Sk_b, Hkv, dim] tensor.
HostTensor gather_pages(const Problem& p, const TensorMap& inputs, const char* cache, int64_t b, int64_t dim) {
  const HostTensor& c = inputs.at(cache);
  const HostTensor& table = inputs.at("block_table");
  const int64_t lk = p.seqlens_k[b], width = table.dim(1);
  HostTensor s(c.dtype(), {1, lk, p.heads_kv, dim});
  for (int64_t j = 0; j < lk; ++j) {
    const auto page = static_cast<int64_t>(table.get(b * width + j / p.page_size));
    for (int64_t h = 0; h < p.heads_kv; ++h)
      for (int64_t d = 0; d < dim; ++d)
        s.set_code((j * p.heads_kv + h) * dim + d, c.code(cache_index(p, page, j % p.page_size, h, d, dim)));
  }
  return s;
}

// Sequence b's ALiBi slopes: all of them per head, its row [1, Hq] per (batch, head) (zeros for
// the empty sequence of a batch of none).
HostTensor sequence_slopes(const Problem& p, const TensorMap& inputs, int64_t b) {
  const HostTensor& all = inputs.at("alibi_slopes");
  if (p.alibi == Alibi::per_head) return all;
  HostTensor s(DType::fp32, {1, p.heads_q});
  for (int64_t h = 0; b < p.batch && h < p.heads_q; ++h) s.set(h, all.get(b * p.heads_q + h));
  return s;
}

// Sequence b's fp8 descales: per tensor the input itself, per (batch, KV head) its row [1, Hkv]
// (zeros for the empty sequence of a batch of none).
void add_sequence_descales(const Problem& p, const TensorMap& inputs, int64_t b, TensorMap& in) {
  if (p.fp8 == Fp8::none) return;
  for (const char* name : {"q_descale", "k_descale", "v_descale"}) {
    if (name[0] == 'q' && p.fp8 != Fp8::qkv) continue;
    const HostTensor& all = inputs.at(name);
    if (p.descale == Descale::per_tensor) {
      in.emplace(name, all);
      continue;
    }
    HostTensor row(DType::fp32, {1, p.heads_kv});
    for (int64_t h = 0; b < p.batch && h < p.heads_kv; ++h) row.set(h, all.get(b * p.heads_kv + h));
    in.emplace(name, std::move(row));
  }
}

// Sequence b's rows of a packed input: `rows` tokens from token `row0`, each `width` elements.
HostTensor slice_rows(const HostTensor& t, int64_t row0, int64_t rows, int64_t heads, int64_t d) {
  HostTensor s(t.dtype(), {1, rows, heads, d});
  const int64_t width = heads * d;
  for (int64_t e = 0; e < rows * width; ++e) s.set_code(e, t.code(row0 * width + e));
  return s;
}

}  // namespace

References varlen_reference(const Problem& p, const TensorMap& inputs) {
  const std::vector<int64_t> cu_q = cu_seqlens(p.seqlens_q);
  const std::vector<int64_t> cu_k = cu_seqlens_k(p);  // each sequence at its segment, past the padding before it
  const bool backward = p.direction == Direction::backward;
  References r;
  SinkGradients sinks(p.sinks && backward ? p.heads_q : 0);  // every sequence's, added
  // A batch of no sequences runs one empty sequence, so that every output and bound is named.
  for (int64_t b = 0; b < std::max<int64_t>(p.batch, 1); ++b) {
    const Problem s = b < p.batch ? p.sequence(b) : empty_sequence(p);
    TensorMap in;
    in.emplace("q", slice_rows(inputs.at("q"), cu_q[b], s.seq_q, p.heads_q, p.head_dim));
    if (p.paged() && b < p.batch) {
      in.emplace("k", gather_pages(p, inputs, "k_cache", b, p.head_dim));
      in.emplace("v", gather_pages(p, inputs, "v_cache", b, p.head_dim_v));
    } else if (p.paged()) {  // the empty sequence of a batch of none
      in.emplace("k", HostTensor(p.kv_dtype(), {1, 0, p.heads_kv, p.head_dim}));
      in.emplace("v", HostTensor(p.kv_dtype(), {1, 0, p.heads_kv, p.head_dim_v}));
    } else {
      in.emplace("k", slice_rows(inputs.at("k"), cu_k[b], s.seq_k, p.heads_kv, p.head_dim));
      in.emplace("v", slice_rows(inputs.at("v"), cu_k[b], s.seq_k, p.heads_kv, p.head_dim_v));
    }
    if (backward) in.emplace("dO", slice_rows(inputs.at("dO"), cu_q[b], s.seq_q, p.heads_q, p.head_dim_v));
    if (p.sinks) in.emplace("sinks", inputs.at("sinks"));
    if (p.alibi != Alibi::none) in.emplace("alibi_slopes", sequence_slopes(p, inputs, b));
    add_sequence_descales(p, inputs, b, in);
    SinkGradients sb(p.sinks && backward ? p.heads_q : 0);
    const References rb = backward ? backward_reference(s, in, p.sinks ? &sb : nullptr) : reference(s, in);
    if (p.sinks && backward) sinks.add(sb);
    if (!rb.reduction.empty() || !rb.bound_below.empty() || !rb.conservation.empty())
      throw std::logic_error("sdpa varlen reference: a dense reference grew a kind of bound this join does not place");
    const Place at{&p, cu_q[b], cu_k[b], p.total_q(), s.seq_q};
    place(p, at, rb.exact, r.exact);
    place(p, at, rb.lowp, r.lowp);
    place(p, at, rb.bound, r.bound);
    join_energy(p, at, rb.energy, r.energy);
  }
  if (p.sinks && backward) sinks.finish(r);
  return r;
}

}  // namespace opcts::sdpa
