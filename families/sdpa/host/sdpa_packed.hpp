// The packed layouts' tensor plumbing shared by host.flash's varlen and paged runners
// (sdpa_flash_varlen.cpp, sdpa_flash_paged.cpp): reading cu_seqlens as a kernel does, a
// sequence's rows of a packed [T, H, D] tensor, and writing a result back.
#pragma once

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "families/sdpa/sdpa.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_sdpa {

// cu_seqlens as the kernel reads them: int32 [B + 1], 0 first, non-decreasing, ending at the
// packed tensor's row count.
inline std::vector<int64_t> read_cu_seqlens(const TensorMap& in, const char* name, int64_t batch, int64_t rows) {
  const auto it = in.find(name);
  if (it == in.end()) throw InvalidArgument(name, "the varlen and paged layouts need it");
  const HostTensor& t = it->second;
  if (t.dtype() != DType::int32 || t.shape().size() != 1 || t.dim(0) != batch + 1)
    throw InvalidArgument(name, "must be int32 [batch + 1] = [" + std::to_string(batch + 1) + "]");
  std::vector<int64_t> cu(static_cast<size_t>(batch + 1));
  for (int64_t b = 0; b <= batch; ++b) cu[b] = static_cast<int64_t>(t.get(b));
  if (cu[0] != 0) throw InvalidArgument(name, "must start at 0, got " + std::to_string(cu[0]));
  for (int64_t b = 0; b < batch; ++b)
    if (cu[b + 1] < cu[b])
      throw InvalidArgument(name, "is not non-decreasing at sequence " + std::to_string(b) + " (" +
                                      std::to_string(cu[b]) + " then " + std::to_string(cu[b + 1]) + ")");
  if (cu[batch] != rows)
    throw InvalidArgument(name, "ends at " + std::to_string(cu[batch]) + ", but the packed tensor has " +
                                    std::to_string(rows) + " tokens");
  return cu;
}

// seqused_k as the kernel reads it: int32 [batch], sequence b's key count within [0,
// capacity[b]] (`capacity_what` says what bounds it: "its table", "its rows of cu_seqlens_k").
inline std::vector<int64_t> read_seqused_k(const HostTensor& u, const std::vector<int64_t>& capacity,
                                           const std::string& capacity_what) {
  const auto batch = static_cast<int64_t>(capacity.size());
  if (u.dtype() != DType::int32 || u.shape().size() != 1 || u.dim(0) != batch)
    throw InvalidArgument("seqused_k", "must be int32 [batch] = [" + std::to_string(batch) + "]");
  std::vector<int64_t> used(capacity.size());
  for (int64_t b = 0; b < batch; ++b) {
    used[b] = static_cast<int64_t>(u.get(b));
    if (used[b] < 0 || used[b] > capacity[b])
      throw InvalidArgument("seqused_k", "sequence " + std::to_string(b) + " has " + std::to_string(used[b]) +
                                             " keys; " + capacity_what + " holds " + std::to_string(capacity[b]));
  }
  return used;
}

// Rows [row0, row0 + rows) of a packed [T, H, D] tensor as a [1, rows, H, D] one.
inline HostTensor rows_of(const HostTensor& t, int64_t row0, int64_t rows) {
  const int64_t heads = t.dim(1), d = t.dim(2), width = heads * d;
  HostTensor s(t.dtype(), {1, rows, heads, d});
  for (int64_t e = 0; e < rows * width; ++e) s.set_code(e, t.code(row0 * width + e));
  return s;
}

// Writes rows [skip, rows) of a [1, rows, H, D] result at packed rows row0 + skip onwards.
inline void put_rows(HostTensor& out, const HostTensor& r, int64_t row0, int64_t skip) {
  const int64_t width = out.dim(1) * out.dim(2), rows = r.dim(1);
  for (int64_t e = skip * width; e < rows * width; ++e) out.set_code(row0 * width + e, r.code(e));
}

/// The per-sequence inputs beside q, k and v that a packed runner hands its dense kernel for
/// sequence b: the sinks (per head: all of them), the fp8 descales (per tensor: the input; per
/// (batch, KV head): sequence b's row, as [1, Hkv]), the ALiBi slopes (per head: all; per (batch,
/// head): sequence b's row, as [1, Hq]). `descale_row` is the descales' row handed over: b, or 0
/// under the head0 plant (a kernel that reads entry [0, 0] reads sequence 0's for every sequence).
inline void add_sequence_extras(const sdpa::Problem& p, const TensorMap& in, int64_t b, TensorMap& sin,
                                int64_t descale_row) {
  if (p.sinks) sin.emplace("sinks", in.at("sinks"));
  for (const char* name : {"q_descale", "k_descale", "v_descale"}) {
    if (p.fp8 == sdpa::Fp8::none || (name[0] == 'q' && p.fp8 != sdpa::Fp8::qkv)) continue;
    const auto it = in.find(name);
    if (it == in.end()) throw InvalidArgument(name, "missing: fp8 inputs need their descales");
    if (p.descale == sdpa::Descale::per_tensor) {
      sin.emplace(name, it->second);  // the dense kernel checks its shape
      continue;
    }
    if (it->second.dtype() != DType::fp32 || it->second.shape() != std::vector<int64_t>{p.batch, p.heads_kv})
      throw InvalidArgument(name, "must be fp32 [batch, heads_kv]");
    HostTensor row(DType::fp32, {1, p.heads_kv});
    for (int64_t h = 0; h < p.heads_kv; ++h) row.set(h, it->second.get(descale_row * p.heads_kv + h));
    sin.emplace(name, std::move(row));
  }
  if (p.alibi == sdpa::Alibi::none) return;
  const HostTensor& all = in.at("alibi_slopes");
  if (p.alibi == sdpa::Alibi::per_head) {
    sin.emplace("alibi_slopes", all);
    return;
  }
  if (all.dtype() != DType::fp32 || all.shape() != std::vector<int64_t>{p.batch, p.heads_q})
    throw InvalidArgument("alibi_slopes", "must be fp32 [batch, heads_q]");
  HostTensor row(DType::fp32, {1, p.heads_q});
  for (int64_t h = 0; h < p.heads_q; ++h) row.set(h, all.get(b * p.heads_q + h));
  sin.emplace("alibi_slopes", std::move(row));
}

/// A sequence's dense problem as the packed runners build it from the data's lengths: batch 1,
/// BSHD, no lists, pages or corruption (the runners have read the index inputs already).
inline sdpa::Problem dense_sequence(const sdpa::Problem& p, int64_t lq, int64_t lk) {
  sdpa::Problem s = p;
  s.batch = 1, s.seq_q = lq, s.seq_k = lk, s.layout = sdpa::Layout::bshd;
  s.seqlens_q.clear(), s.seqlens_k.clear();
  s.page_size = 0, s.kv_layout = sdpa::KvLayout::nhd, s.shared_prefix = 0, s.corrupt = sdpa::Corrupt::none;
  return s;
}

}  // namespace opcts::host_sdpa
