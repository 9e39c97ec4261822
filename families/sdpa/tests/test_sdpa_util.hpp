// Helpers of the sdpa tests (test_sdpa.cpp, test_sdpa_backward.cpp): problems, inputs, running
// an impl against the references under cases/tolerances.yaml, and a naive forward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "app/builtins.hpp"
#include "core/family.hpp"
#include "families/sdpa/sdpa.hpp"
#include "judge/compare.hpp"
#include "judge/tolerance.hpp"

namespace opcts::sdpatest {

inline sdpa::Problem make(DType t, int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t sk, int64_t d,
                          sdpa::Mask m) {
  sdpa::Problem p;
  p.dtype = t;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seq_q = sq;
  p.seq_k = sk;
  p.head_dim = d;
  p.head_dim_v = d;
  p.mask = m;
  return p;
}

inline const Family& family() { return *builtin_registry().family("sdpa"); }
/// The message of parsing a YAML problem, "" when it parses.
inline std::string parse_error(const std::string& yaml) {
  try {
    family().parse(YAML::Load(yaml));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
inline TensorMap inputs_of(const sdpa::Problem& p) { return family().make_inputs(p, case_seed(family(), p)); }
inline const ToleranceTable& tolerances() {
  // One literal, not std::string + "...": GCC 12 warns (-Wstringop-overflow, a false positive)
  // on that concatenation once it is inlined here.
  static const ToleranceTable t = ToleranceTable::load(OPCTS_SOURCE_CASES_DIR "/tolerances.yaml");
  return t;
}

/// Compares every output of `out` with the references under cases/tolerances.yaml, as
/// execute_case does (floors and row lengths included); the statistics per output name.
inline std::map<std::string, OutputStats> compare_all(const std::string& impl, const sdpa::Problem& p,
                                                      const References& r, const TensorMap& out) {
  std::map<std::string, OutputStats> stats;
  for (const auto& spec : family().outputs(p)) {
    const Tolerance tol =
        tolerances().resolve("sdpa", spec.name, spec.dtype, impl, "host", sdpa::problem_id(p), nullptr);
    std::vector<WorstElement> worst;
    stats[spec.name] = compare_output(spec.name, out.at(spec.name),
                                      {.want = r.exact.at(spec.name),
                                       .lowp = &r.lowp.at(spec.name),
                                       .bound = &r.bound.at(bound_key(spec.name, tol.accumulation)),
                                       .row = spec.row},
                                      tol, worst);
  }
  return stats;
}

/// Runs `impl` on p and compares every output; returns the total number of mismatches and
/// fills `why` with the per-output statistics (error ÷ bound).
inline int64_t mismatches_of(const std::string& impl, const sdpa::Problem& p, std::string* why = nullptr) {
  const TensorMap in = inputs_of(p);
  const References r = family().reference(p, in);
  const ArchInfo host{"host", "host"};
  const TensorMap out = builtin_registry().impl(impl)->run(p, in, RunContext{&host, -1});
  int64_t bad = 0;
  for (const auto& [name, s] : compare_all(impl, p, r, out)) {
    bad += s.mismatches;
    if (why)
      *why += name + ": err " + std::to_string(s.max_abs_err) + " / bound " + std::to_string(s.bound) + ", " +
              std::to_string(s.mismatches) + " mismatches; ";
  }
  return bad;
}

/// The planted impl takes p and fails on it (a packed problem's plant; test_sdpa.cpp's own
/// expect_caught also checks that host.flash passes).
inline void expect_planted_caught(const char* impl, const sdpa::Problem& p) {
  const ArchInfo host{"host", "host"};
  ASSERT_TRUE(builtin_registry().impl(impl)->supports(p, host).ok) << impl << " " << sdpa::problem_id(p);
  std::string why;
  EXPECT_GT(mismatches_of(impl, p, &why), 0) << impl << " passed " << sdpa::problem_id(p) << ": " << why;
}

/// The planted impl takes p and fails on it, where host.flash passes.
inline void expect_caught(const char* impl, const sdpa::Problem& p) {
  ASSERT_TRUE(builtin_registry().impl(impl)->planted());
  expect_planted_caught(impl, p);
  std::string why;
  EXPECT_EQ(mismatches_of("host.flash", p, &why), 0) << sdpa::problem_id(p) << ": " << why;
}

/// The index of logical element (b, h, s, d) in a tensor stored in p's layout.
inline int64_t at(const sdpa::Problem& p, int64_t heads, int64_t seq, int64_t dim, int64_t b, int64_t h, int64_t s,
                  int64_t d) {
  if (p.layout == sdpa::Layout::bshd) return ((b * seq + s) * heads + h) * dim + d;
  return ((b * heads + h) * seq + s) * dim + d;
}

/// A naive forward straight from the definition (sdpa.hpp), in double, one score at a time:
/// O (storage order) and lse. Reads only the keys a row may see. Sinks as gpt-oss's reference
/// writes them: the sink's logit one more column of the scores, dropped after the softmax.
struct Naive {
  std::vector<double> o, lse;
};
inline Naive naive_forward(const sdpa::Problem& p, const TensorMap& in) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const auto& q = in.at("q");
  const auto& k = in.at("k");
  const auto& v = in.at("v");
  const int64_t D = p.head_dim, Dv = p.head_dim_v, group = p.heads_q / p.heads_kv;
  Naive n;
  n.o.assign(p.batch * p.heads_q * p.seq_q * Dv, 0.0);
  n.lse.assign(p.batch * p.heads_q * p.seq_q, ninf);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        std::vector<double> s(p.seq_k, ninf);
        double m = ninf;
        for (int64_t j = 0; j < p.seq_k; ++j) {
          // The definition, spelled out: causal, then the FlashAttention window.
          bool keep = true;
          if (p.mask == sdpa::Mask::causal_upper_left) keep = j <= i;
          if (p.mask == sdpa::Mask::causal_lower_right) keep = j <= i + p.seq_k - p.seq_q;
          if (p.window_left >= 0 && j < i + p.seq_k - p.seq_q - p.window_left) keep = false;
          if (p.window_right >= 0 && j > i + p.seq_k - p.seq_q + p.window_right) keep = false;
          const int64_t mrows = p.mask_per_query ? p.seq_q : 1;  // [.., 1, Sk]: one row for every query
          const int64_t mi = (p.mask_per_batch ? b : 0) * (p.mask_per_head ? p.heads_q : 1) * mrows * p.seq_k +
                             (p.mask_per_head ? h : 0) * mrows * p.seq_k + (p.mask_per_query ? i : 0) * p.seq_k + j;
          if (p.mask_tensor == sdpa::MaskTensor::boolean && in.at("attn_mask").get(mi) == 0) keep = false;
          if (p.block_q > 0) {  // the block mask [B, Hq, ⌈Sq/bq⌉, ⌈Sk/bk⌉]
            const int64_t nq = (p.seq_q + p.block_q - 1) / p.block_q, nk = (p.seq_k + p.block_k - 1) / p.block_k;
            if (in.at("block_mask").get(((b * p.heads_q + h) * nq + i / p.block_q) * nk + j / p.block_k) == 0)
              keep = false;
          }
          if (!keep) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q.get(at(p, p.heads_q, p.seq_q, D, b, h, i, d)) *
                   k.get(at(p, p.heads_kv, p.seq_k, D, b, h / group, j, d));
          double x = dot * p.effective_scale();
          if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
          if (p.alibi != sdpa::Alibi::none)  // FlashAttention-2: −slope·|i + Sk − Sq − j|
            x -= in.at("alibi_slopes").get((p.alibi == sdpa::Alibi::per_batch_head ? b : 0) * p.heads_q + h) *
                 std::fabs(static_cast<double>(i + p.seq_k - p.seq_q - j));
          if (p.mask_tensor == sdpa::MaskTensor::additive) x += in.at("attn_mask").get(mi);
          s[j] = x;
          m = std::max(m, x);
        }
        const double sink = p.sinks ? in.at("sinks").get(h) : ninf;
        m = std::max(m, sink);
        if (m == ninf) continue;
        double l = p.sinks ? std::exp(sink - m) : 0.0;
        for (int64_t j = 0; j < p.seq_k; ++j) l += s[j] == ninf ? 0 : std::exp(s[j] - m);
        n.lse[(b * p.heads_q + h) * p.seq_q + i] = m + std::log(l);
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < p.seq_k; ++j)
            if (s[j] != ninf) acc += std::exp(s[j] - m) / l * v.get(at(p, p.heads_kv, p.seq_k, Dv, b, h / group, j, d));
          n.o[at(p, p.heads_q, p.seq_q, Dv, b, h, i, d)] = acc;
        }
      }
  return n;
}

/// Problems covering every variant at a small size (forward; set direction for backward).
inline std::vector<sdpa::Problem> variants(DType t) {
  using sdpa::Mask;
  std::vector<sdpa::Problem> v;
  auto add = [&](sdpa::Problem p) { v.push_back(p); };
  add(make(t, 2, 4, 2, 9, 13, 8, Mask::none));
  auto p = make(t, 1, 6, 2, 11, 7, 8, Mask::causal_lower_right);
  p.head_dim_v = 5;
  add(p);
  p = make(t, 1, 2, 1, 10, 10, 4, Mask::causal_upper_left);
  p.window_left = 2, p.window_right = 1;
  add(p);
  p = make(t, 1, 2, 2, 6, 14, 4, Mask::none);
  p.window_left = 3, p.window_right = 0;
  add(p);
  p = make(t, 1, 4, 2, 8, 12, 6, Mask::causal_lower_right);
  p.softcap = 2.5;
  p.scale = 1.5;
  add(p);
  p = make(t, 2, 4, 2, 12, 9, 4, Mask::none);
  p.mask_tensor = sdpa::MaskTensor::boolean;
  p.mask_per_head = true;
  add(p);
  p = make(t, 2, 4, 4, 12, 9, 4, Mask::causal_lower_right);
  p.mask_tensor = sdpa::MaskTensor::additive;
  p.mask_per_batch = true;
  add(p);
  p = make(t, 2, 6, 3, 7, 11, 4, Mask::causal_upper_left);
  p.head_dim_v = 6;
  p.layout = sdpa::Layout::bshd;
  p.window_left = 4;
  add(p);
  p = make(t, 1, 2, 1, 5, 12, 4, Mask::causal_upper_left);
  p.poison_masked = true;
  add(p);
  // Sinks: rows that see no key (the first two of causal_lower_right with Sq > Sk: the sink
  // alone), a batch of two (dsinks sums it), GQA; and under a boolean mask and a softcap.
  p = make(t, 2, 4, 2, 9, 7, 8, Mask::causal_lower_right);
  p.sinks = true;
  add(p);
  p = make(t, 1, 2, 1, 12, 9, 4, Mask::none);
  p.mask_tensor = sdpa::MaskTensor::boolean;
  p.softcap = 2.5;
  p.sinks = true;
  add(p);
  // ALiBi: per head under GQA with Sq < Sk (the lower-right distance differs from |i − j|), and
  // per (batch, head) with a softcap (the bias after it) and an additive mask.
  p = make(t, 1, 4, 2, 7, 13, 8, Mask::none);
  p.alibi = sdpa::Alibi::per_head;
  add(p);
  p = make(t, 2, 2, 1, 9, 9, 8, Mask::causal_lower_right);
  p.alibi = sdpa::Alibi::per_batch_head;
  p.softcap = 2.5;
  p.mask_tensor = sdpa::MaskTensor::additive;
  add(p);
  // Masks of one row broadcast over the queries ([.., 1, Sk]): an additive bias per (head, key)
  // under GQA and a softcap, and a boolean key-padding mask per batch entry.
  p = make(t, 2, 4, 2, 9, 11, 8, Mask::causal_lower_right);
  p.mask_tensor = sdpa::MaskTensor::additive;
  p.mask_per_head = true, p.mask_per_query = false;
  p.softcap = 2.5;
  add(p);
  p = make(t, 2, 2, 1, 6, 10, 4, Mask::none);
  p.mask_tensor = sdpa::MaskTensor::boolean;
  p.mask_per_batch = true, p.mask_per_query = false;
  add(p);
  // Block-sparse: blocks of 4 × 3 (key blocks 3 and 7 read by no query block: NaN there; query
  // block 2 reads none), under causal lower-right with GQA; blocks of 2 × 5 with an additive mask.
  p = make(t, 2, 4, 2, 13, 26, 8, Mask::causal_lower_right);
  p.block_q = 4, p.block_k = 3;
  add(p);
  p = make(t, 1, 2, 1, 11, 20, 4, Mask::none);
  p.block_q = 2, p.block_k = 5;
  p.mask_tensor = sdpa::MaskTensor::additive;
  p.softcap = 2.5;
  add(p);
  return v;
}

}  // namespace opcts::sdpatest
