// sdpa's invariance cuts beyond the dense batch (Family::invariance_cut; core/invariance.hpp):
// a varlen batch cut by its sequences (cu_seqlens), and the packing axis, a dense batch packed as
// varlen sequences or a varlen batch of equal lengths given dense. The dense batch's own cuts are
// the family default's (every tensor leads with the batch entries).
//
// The tensors that follow the tokens: q, dO, O, dQ ([B, S, H, D] bshd, [B, H, S, D] bhsd,
// [T, H, D] varlen), k, v, dK, dV the same with the keys, and lse ([B, Hq, Sq] dense, [Hq, Tq]
// varlen). Per-entry inputs (ALiBi slopes and fp8 descales of [B, ·]) follow the entries; the rest
// (sinks) are the case's; cu_seqlens and seqused_k are the sub-problem's own. dsinks sums over the
// batch and is not compared.
#include <algorithm>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

namespace {

bool is_query_side(const std::string& name) { return name == "q" || name == "dO" || name == "O" || name == "dQ"; }
bool is_key_side(const std::string& name) { return name == "k" || name == "v" || name == "dK" || name == "dV"; }
bool is_index_input(const std::string& name) {
  return name == "cu_seqlens_q" || name == "cu_seqlens_k" || name == "seqused_k";
}

// The element width of one token row of a token tensor: heads × its head dim.
int64_t row_width(const Problem& p, const std::string& name) {
  if (name == "q" || name == "dQ") return p.heads_q * p.head_dim;
  if (name == "dO" || name == "O") return p.heads_q * p.head_dim_v;
  if (name == "k" || name == "dK") return p.heads_kv * p.head_dim;
  return p.heads_kv * p.head_dim_v;  // v, dV
}

int64_t heads_of(const Problem& p, const std::string& name) { return is_query_side(name) ? p.heads_q : p.heads_kv; }

// The outputs whose every element belongs to one token of one sequence (dsinks sums over them).
std::vector<std::string> token_outputs(const Problem& p) {
  if (p.direction == Direction::backward) return {"dQ", "dK", "dV"};
  return {"O", "lse"};
}

// The packing axis's runs of one tensor between a dense problem d and its varlen twin (the same B,
// lengths and heads): element (b, s, h, x) of each. dense_first: from = d's index, to = the twin's.
std::vector<SharedRun> packing_runs(const Problem& d, const std::string& name, bool dense_first) {
  std::vector<SharedRun> runs;
  const auto add = [&](int64_t dense, int64_t packed, int64_t count, int64_t b) {
    runs.push_back(dense_first ? SharedRun{packed, dense, count, b} : SharedRun{dense, packed, count, b});
  };
  const int64_t B = d.batch;
  if (name == "lse") {  // [B, Hq, Sq] and [Hq, B·Sq]
    const int64_t Sq = d.seq_q, Tq = B * Sq;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < d.heads_q; ++h) add((b * d.heads_q + h) * Sq, h * Tq + b * Sq, Sq, b);
    return runs;
  }
  const int64_t S = is_query_side(name) ? d.seq_q : d.seq_k, W = row_width(d, name), H = heads_of(d, name),
                D = W / std::max<int64_t>(H, 1);
  for (int64_t b = 0; b < B; ++b) {
    if (d.layout == Layout::bshd) {  // the very same element order: one run per entry
      add(b * S * W, b * S * W, S * W, b);
      continue;
    }
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) add(((b * H + h) * S + s) * D, ((b * S + s) * H + h) * D, D, b);
  }
  return runs;
}

// The packing cut: p's batch in the other layout.
InvarianceCut packing_cut(const Problem& p, const TensorMap& inputs) {
  if (const std::string why = packing_uncut(p); !why.empty()) return InvarianceCut::none(why);
  Problem twin = p;
  if (p.varlen()) {
    twin.layout = Layout::bshd;
    twin.seqlens_q.clear();
    twin.seqlens_k.clear();
  } else {
    twin.layout = Layout::varlen;
    twin.seqlens_q.assign(static_cast<size_t>(p.batch), p.seq_q);
    twin.seqlens_k.assign(static_cast<size_t>(p.batch), p.seq_k);
  }
  try {
    twin.validate();
  } catch (const std::invalid_argument& e) {
    return InvarianceCut::none(std::string("its ") + std::string(to_string(twin.layout)) +
                               " twin is malformed: " + e.what());
  }
  const Problem& dense = p.varlen() ? twin : p;
  InvarianceCut cut;
  cut.problem = make_problem(twin);
  cut.what = p.varlen() ? "batch given dense (bshd)"
                        : "batch packed as " + std::to_string(p.batch) + " varlen sequences (cu_seqlens)";
  for (const auto& [name, t] : inputs) {
    if (is_index_input(name)) continue;
    if (is_query_side(name) || is_key_side(name)) cut.inputs[name] = packing_runs(dense, name, !p.varlen());
    else cut.inputs[name] = {{0, 0, t.numel(), -1}};  // sinks, ALiBi slopes, descales: the same shape
  }
  for (const std::string& o : token_outputs(p)) cut.outputs[o] = packing_runs(dense, o, !p.varlen());
  return cut;
}

// A varlen batch cut to its first sequence (batch_size) or reversed (batch_position).
InvarianceCut varlen_cut(const Problem& p, const TensorMap& inputs, InvarianceAxis axis) {
  const int64_t B = p.batch;
  if (B < 2) return InvarianceCut::none(B == 1 ? "a batch of one sequence" : "an empty batch");
  std::vector<int64_t> entries{0};
  if (axis == InvarianceAxis::batch_position) {
    entries.resize(static_cast<size_t>(B));
    for (int64_t s = 0; s < B; ++s) entries[s] = B - 1 - s;
  }
  Problem sub = p;
  sub.batch = static_cast<int64_t>(entries.size());
  sub.seqlens_q.clear();
  sub.seqlens_k.clear();
  for (int64_t e : entries) sub.seqlens_q.push_back(p.seqlens_q[e]), sub.seqlens_k.push_back(p.seqlens_k[e]);
  sub.seq_q = *std::max_element(sub.seqlens_q.begin(), sub.seqlens_q.end());
  sub.seq_k = *std::max_element(sub.seqlens_k.begin(), sub.seqlens_k.end());
  InvarianceCut cut;
  cut.problem = make_problem(sub);
  cut.what = axis == InvarianceAxis::batch_size ? "sequence run alone (a batch of 1)"
                                                : "batch of " + std::to_string(B) + " sequences reversed (sequence " +
                                                      std::to_string(B - 1) + " first)";
  // Sequence b's query rows and key segments (its keys, then its pad_k padding rows) in each batch.
  const std::vector<int64_t> cu_q = cu_seqlens(p.seqlens_q), cu_k = cu_seqlens_k(p);
  const std::vector<int64_t> sub_q = cu_seqlens(sub.seqlens_q), sub_k = cu_seqlens_k(sub);
  const auto rows = [&](const std::string& name, bool output) {
    std::vector<SharedRun> runs;
    const int64_t W = row_width(p, name);
    for (size_t s = 0; s < entries.size(); ++s) {
      const int64_t b = entries[s];
      if (is_query_side(name)) {
        runs.push_back({sub_q[s] * W, cu_q[b] * W, p.seqlens_q[b] * W, b});
      } else {  // an output's padding rows depend on nothing (its dK, dV there are not compared)
        const int64_t n = output ? p.seqlens_k[b] : p.seqlens_k[b] + p.pad_k;
        runs.push_back({sub_k[s] * W, cu_k[b] * W, n * W, b});
      }
    }
    return runs;
  };
  for (const auto& [name, t] : inputs) {
    if (is_index_input(name)) continue;
    if (is_query_side(name) || is_key_side(name)) {
      cut.inputs[name] = rows(name, false);
    } else if (t.shape().size() == 2 && t.dim(0) == B) {  // [B, ·]: ALiBi slopes, descales per entry
      const int64_t per = t.dim(1);
      for (size_t s = 0; s < entries.size(); ++s)
        cut.inputs[name].push_back({static_cast<int64_t>(s) * per, entries[s] * per, per, entries[s]});
    } else {
      cut.inputs[name] = {{0, 0, t.numel(), -1}};  // sinks, per-tensor descales
    }
  }
  for (const std::string& o : token_outputs(p)) {
    if (o != "lse") {
      cut.outputs[o] = rows(o, true);
      continue;
    }
    const int64_t Tq = p.total_q(), sub_Tq = sub_q.back();
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (size_t s = 0; s < entries.size(); ++s) {
        const int64_t b = entries[s];
        cut.outputs[o].push_back({h * sub_Tq + sub_q[s], h * Tq + cu_q[b], p.seqlens_q[b], b});
      }
  }
  return cut;
}

}  // namespace

std::string packing_uncut(const Problem& p) {
  if (p.paged()) return "the paged layout's sequences share one KV cache: --invariance does not cut it";
  if (p.batch == 0) return "an empty batch";
  if (p.varlen()) {
    for (int64_t b = 0; b < p.batch; ++b)
      if (p.seqlens_q[b] != p.seq_q || p.seqlens_k[b] != p.seq_k)
        return "sequences of unequal lengths: a dense batch would pad them";
    if (p.pad_k > 0) return "padding rows after the keys (seqused_k): a dense batch has none";
    return "";
  }
  if (p.mask_tensor != MaskTensor::none) return "the varlen layout takes no attn_mask";
  if (p.block_sparse()) return "the varlen layout takes no block mask";
  if (p.fp8_out) return "the varlen layout takes no fp8 output";
  return "";
}

InvarianceCut invariance_cut(const Problem& p, const TensorMap& inputs, InvarianceAxis axis) {
  if (axis == InvarianceAxis::packing) return packing_cut(p, inputs);
  if (p.paged())
    return InvarianceCut::none("the paged layout's sequences share one KV cache: --invariance does not cut it");
  return varlen_cut(p, inputs, axis);
}

}  // namespace opcts::sdpa
