// SDPA varlen layout: the id's length lists, YAML lists and their errors, the packed inputs, the
// references against a naive varlen forward written from the definition over the packed
// tensors, host.flash forward and backward, its cu_seqlens checks, the planted varlen bugs
// caught (and skipped only where they cannot change the output), padding rows after each
// sequence's keys (pad_k, seqused_k), and the ABI minor version that keeps the layout from impls
// built before it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include <yaml-cpp/yaml.h>
#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "core/errors.hpp"
#include "families/sdpa/sdpa.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using sdpa::Mask;
using sdpatest::family;
using sdpatest::inputs_of;
using sdpatest::make;
using sdpatest::parse_error;

sdpa::Problem varlen(DType t, int64_t hq, int64_t hkv, std::vector<int64_t> lq, std::vector<int64_t> lk, int64_t d,
                     Mask m) {
  sdpa::Problem p = make(t, static_cast<int64_t>(lq.size()), hq, hkv, 0, 0, d, m);
  p.layout = sdpa::Layout::varlen;
  for (int64_t x : lq) p.seq_q = std::max(p.seq_q, x);
  for (int64_t x : lk) p.seq_k = std::max(p.seq_k, x);
  p.seqlens_q = std::move(lq);
  p.seqlens_k = std::move(lk);
  return p;
}

TEST(SdpaVarlenId, ListsRunsAndEmptyBatchesRoundTrip) {
  const sdpa::Problem serving =
      varlen(DType::bf16, 4, 2, {1, 1, 1, 40}, {100, 64, 70, 40}, 64, Mask::causal_lower_right);
  EXPECT_EQ(sdpa::problem_id(serving), "bf16_b4_hq4_hkv2_sq1r3x40_sk100x64x70x40_d64_causal_lr_varlen");
  sdpa::Problem bwd = varlen(DType::fp16, 8, 8, {3, 0, 17}, {5, 9, 0}, 128, Mask::causal_upper_left);
  bwd.direction = sdpa::Direction::backward;
  bwd.window_left = 4, bwd.window_right = 0;
  const sdpa::Problem one = varlen(DType::fp32, 2, 1, {7}, {9}, 32, Mask::none);
  const sdpa::Problem none = varlen(DType::bf16, 2, 2, {}, {}, 64, Mask::none);
  const sdpa::Problem equal = varlen(DType::bf16, 2, 2, {5, 5, 5}, {5, 5, 5}, 64, Mask::none);
  EXPECT_EQ(sdpa::problem_id(none), "bf16_b0_hq2_hkv2_sq0r0_sk0r0_d64_nomask_varlen");
  EXPECT_EQ(sdpa::problem_id(equal), "bf16_b3_hq2_hkv2_sq5r3_sk5r3_d64_nomask_varlen");
  for (const sdpa::Problem& p : {serving, bwd, one, none, equal}) {
    const std::string id = sdpa::problem_id(p);
    EXPECT_EQ(sdpa::parse_problem_id(id), p) << id;
  }
  // A dense id keeps its spelling, and lists without the varlen token are refused.
  EXPECT_EQ(sdpa::problem_id(sdpa::parse_problem_id("bf16_b2_hq4_hkv2_sq5_sk5_d64_nomask")),
            "bf16_b2_hq4_hkv2_sq5_sk5_d64_nomask");
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq4_hkv2_sq5x6_sk5x6_d64_nomask"), std::invalid_argument);
  // The batch must be the lists' length, and the spelling canonical (runs, no 0-long runs).
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b3_hq4_hkv2_sq5x6_sk5x6_d64_nomask_varlen"), std::invalid_argument);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq4_hkv2_sq5x5_sk5x5_d64_nomask_varlen"), std::invalid_argument);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b1_hq4_hkv2_sq5r1_sk5_d64_nomask_varlen"), std::invalid_argument);
}

TEST(SdpaVarlenYaml, ListsParseAndErrorsNameTheField) {
  const ProblemPtr pp = family().parse(
      YAML::Load("{dtype: bf16, heads: {q: 8, kv: 2}, seq: {q: [1r3, 17], k: [40, 41, 42, 17]}, head_dim: 64, "
                 "mask: causal_lower_right, layout: varlen}"));
  const auto& p = pp->as<sdpa::Problem>();
  EXPECT_EQ(p.batch, 4);
  EXPECT_EQ(p.seqlens_q, (std::vector<int64_t>{1, 1, 1, 17}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int64_t>{40, 41, 42, 17}));
  EXPECT_EQ(p.seq_q, 17);
  EXPECT_EQ(p.seq_k, 42);
  EXPECT_EQ(p.total_q(), 20);
  EXPECT_EQ(p.total_k(), 140);
  // Scalar lengths with layout varlen: every sequence of the batch that long.
  const ProblemPtr ep =
      family().parse(YAML::Load("{dtype: bf16, batch: 3, heads: 2, seq: 9, head_dim: 64, layout: varlen}"));
  EXPECT_EQ(ep->as<sdpa::Problem>().seqlens_k, (std::vector<int64_t>{9, 9, 9}));
  const std::string base = "dtype: bf16, heads: 2, head_dim: 64";
  const std::pair<const char*, const char*> cases[] = {
      {"seq: {q: [1, 2], k: [3]}, layout: varlen", "seq"},
      {"seq: {q: [1, 2], k: 3}, layout: varlen", "seq"},
      {"batch: 3, seq: {q: [1, 2], k: [3, 4]}, layout: varlen", "batch"},
      {"seq: {q: [1, 2], k: [3, 4]}", "varlen"},
      {"seq: {q: [1, -2], k: [3, 4]}, layout: varlen", "seq"},
      {"seq: {q: [1, 2x], k: [3, 4]}, layout: varlen", "seq"},
      {"seq: {q: [1, 2], k: [3, 4]}, layout: varlen, attn_mask: bool", "attn_mask"},
  };
  for (const auto& [extra, needle] : cases) {
    const std::string err = parse_error("{" + base + ", " + extra + "}");
    EXPECT_NE(err.find(needle), std::string::npos) << extra << " -> '" << err << "'";
  }
}

// A malformed length list in a catalog names the file and the line of its problem.
TEST(SdpaVarlenYaml, CatalogErrorsNameFileAndLine) {
  const std::string dir = testutil::temp_dir();
  const std::string path =
      testutil::write(dir, "v.yaml",
                      "family: sdpa\n"
                      "edges:\n"
                      "  - name: e\n"
                      "    why: w\n"
                      "    problem: {dtype: bf16, heads: 2, seq: {q: [1, 2], k: [3]}, head_dim: 64, "
                      "layout: varlen}\n");
  const std::string err = testutil::yaml_error_of([&] { load_catalogs(builtin_registry(), {path}); });
  EXPECT_TRUE(testutil::points_at(err, path, 5, "seq")) << err;
}

TEST(SdpaVarlenInputs, PackedShapesCuSeqlensAndPoisonPerSequence) {
  sdpa::Problem p = varlen(DType::bf16, 4, 2, {3, 0, 5}, {8, 2, 9}, 16, Mask::causal_upper_left);
  p.poison_masked = true;  // upper-left with Sk_b > Sq_b: each sequence's trailing keys
  p.head_dim_v = 8;
  const TensorMap in = inputs_of(p);
  EXPECT_EQ(in.at("q").shape(), (std::vector<int64_t>{8, 4, 16}));
  EXPECT_EQ(in.at("k").shape(), (std::vector<int64_t>{19, 2, 16}));
  EXPECT_EQ(in.at("v").shape(), (std::vector<int64_t>{19, 2, 8}));
  EXPECT_EQ(sdpa::lse_shape(p), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(in.at("cu_seqlens_q").dtype(), DType::int32);
  EXPECT_EQ(in.at("cu_seqlens_q").to_f64(), (std::vector<double>{0, 3, 3, 8}));
  EXPECT_EQ(in.at("cu_seqlens_k").to_f64(), (std::vector<double>{0, 8, 10, 19}));
  // Sequence 0 sees keys 0..2 (rows 0..2 upper-left): packed keys 3..7 are NaN; sequence 1
  // has no query, so both its keys are unseen; sequence 2 sees 0..4 of its 9: 15..18.
  for (int64_t row = 0; row < 19; ++row) {
    const bool poisoned = (row >= 3 && row < 8) || row == 8 || row == 9 || row >= 15;
    EXPECT_EQ(std::isnan(in.at("k").get(row * 2 * 16)), poisoned) << row;
    EXPECT_EQ(std::isnan(in.at("v").get(row * 2 * 8 + 8 + 7)), poisoned) << row;
  }
}

// A naive varlen forward from the definition, over the packed tensors: sequence b's rows and
// keys at its cu_seqlens offsets, the masks aligned by its own lengths.
sdpatest::Naive naive_varlen(const sdpa::Problem& p, const TensorMap& in) {
  const double ninf = -std::numeric_limits<double>::infinity();
  const int64_t Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim, Dv = p.head_dim_v, Tq = p.total_q();
  sdpatest::Naive n;
  n.o.assign(Tq * Hq * Dv, 0.0);
  n.lse.assign(Hq * Tq, ninf);
  int64_t q0 = 0, k0 = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t sq = p.seqlens_q[b], sk = p.seqlens_k[b];
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(sk, ninf);
        double m = ninf;
        for (int64_t j = 0; j < sk; ++j) {
          bool keep = true;
          if (p.mask == Mask::causal_upper_left) keep = j <= i;
          if (p.mask == Mask::causal_lower_right) keep = j <= i + sk - sq;
          if (p.window_left >= 0 && j < i + sk - sq - p.window_left) keep = false;
          if (p.window_right >= 0 && j > i + sk - sq + p.window_right) keep = false;
          if (!keep) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot +=
                in.at("q").get(((q0 + i) * Hq + h) * D + d) * in.at("k").get(((k0 + j) * Hkv + h / (Hq / Hkv)) * D + d);
          double x = dot * p.effective_scale();
          if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
          s[j] = x;
          m = std::max(m, x);
        }
        if (m == ninf) continue;
        double l = 0;
        for (double x : s) l += x == ninf ? 0 : std::exp(x - m);
        n.lse[h * Tq + q0 + i] = m + std::log(l);
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j)
            if (s[j] != ninf)
              acc += std::exp(s[j] - m) / l * in.at("v").get(((k0 + j) * Hkv + h / (Hq / Hkv)) * Dv + d);
          n.o[((q0 + i) * Hq + h) * Dv + d] = acc;
        }
      }
    q0 += sq, k0 += sk + p.pad_k;  // the padding rows after the sequence's keys
  }
  return n;
}

std::vector<sdpa::Problem> varlen_variants(DType t) {
  std::vector<sdpa::Problem> v;
  v.push_back(varlen(t, 4, 2, {3, 0, 17, 1}, {5, 9, 17, 0}, 16, Mask::none));
  v.push_back(varlen(t, 6, 2, {1, 1, 9, 30}, {40, 7, 70, 30}, 16, Mask::causal_lower_right));
  v.push_back(varlen(t, 2, 2, {12, 4}, {6, 20}, 8, Mask::causal_upper_left));
  auto w = varlen(t, 4, 1, {10, 33}, {64, 33}, 8, Mask::causal_lower_right);
  w.window_left = 5, w.window_right = 0, w.softcap = 3, w.head_dim_v = 12;
  v.push_back(w);
  auto poison = varlen(t, 2, 1, {4, 2}, {9, 6}, 8, Mask::causal_upper_left);
  poison.poison_masked = true;
  v.push_back(poison);
  // Padding rows after each sequence's keys (seqused_k): an empty sequence's segment is all
  // padding; lower-right rows reach each sequence's last key, next to its padding.
  auto pad = varlen(t, 4, 2, {3, 0, 5, 2}, {6, 4, 0, 9}, 16, Mask::causal_lower_right);
  pad.pad_k = 3;
  v.push_back(pad);
  return v;
}

TEST(SdpaVarlenReference, MatchesANaiveForwardOverThePackedTensors) {
  for (const sdpa::Problem& p : varlen_variants(DType::fp32)) {
    const TensorMap in = inputs_of(p);
    const References r = family().reference(p, in);
    const sdpatest::Naive n = naive_varlen(p, in);
    const auto& o = r.exact.at("O");
    const auto& lse = r.exact.at("lse");
    ASSERT_EQ(o.size(), n.o.size());
    ASSERT_EQ(lse.size(), n.lse.size());
    for (size_t e = 0; e < o.size(); ++e) ASSERT_NEAR(o[e], n.o[e], 1e-12) << sdpa::problem_id(p) << " O " << e;
    for (size_t e = 0; e < lse.size(); ++e) {
      if (std::isinf(n.lse[e])) EXPECT_EQ(lse[e], n.lse[e]) << e;
      else ASSERT_NEAR(lse[e], n.lse[e], 1e-12) << sdpa::problem_id(p) << " lse " << e;
    }
    EXPECT_TRUE(r.bound.count(bound_key("O", "flash_fp32")) && r.energy.count(bound_key("O", "flash_fp32")));
    EXPECT_EQ(r.energy.at(bound_key("O", "flash_fp32")).weight.size(), o.size());
  }
}

TEST(SdpaVarlenHostFlash, PassesForwardAndBackward) {
  for (DType t : {DType::bf16, DType::fp16}) {
    for (sdpa::Problem p : varlen_variants(t)) {
      for (auto dir : {sdpa::Direction::forward, sdpa::Direction::backward}) {
        p.direction = dir;
        std::string why;
        EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << sdpa::problem_id(p) << ": " << why;
      }
    }
  }
}

TEST(SdpaVarlenHostFlash, RefusesMalformedCuSeqlens) {
  const sdpa::Problem p = varlen(DType::bf16, 2, 2, {3, 4}, {5, 6}, 16, Mask::none);
  const ArchInfo host{"host", "host"};
  const Impl* impl = builtin_registry().impl("host.flash");
  auto refusal = [&](const char* name, std::vector<double> values) {
    TensorMap in = inputs_of(p);
    for (size_t b = 0; b < values.size(); ++b) in.at(name).set(static_cast<int64_t>(b), values[b]);
    try {
      impl->run(p, in, RunContext{&host, -1});
    } catch (const InvalidArgument& e) {
      return e.argument;
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refusal("cu_seqlens_k", {0, 6, 5}), "cu_seqlens_k");   // not non-decreasing
  EXPECT_EQ(refusal("cu_seqlens_q", {1, 3, 7}), "cu_seqlens_q");   // does not start at 0
  EXPECT_EQ(refusal("cu_seqlens_k", {0, 5, 10}), "cu_seqlens_k");  // ends before the tokens do
}

TEST(SdpaVarlenPlanted, BoundaryAndAlignmentBugsAreCaughtWhereTheyShow) {
  const ArchInfo host{"host", "host"};
  for (sdpa::Problem p : varlen_variants(DType::bf16)) {
    for (auto dir : {sdpa::Direction::forward, sdpa::Direction::backward}) {
      p.direction = dir;
      for (const char* impl : {"host.flash_varlen_key_offset", "host.flash_varlen_max_alignment"})
        if (builtin_registry().impl(impl)->supports(p, host).ok) sdpatest::expect_planted_caught(impl, p);
    }
  }
  // Where they show: key_offset on any sequence after the first that sees its first key.
  const auto two = varlen(DType::bf16, 2, 2, {4, 4}, {4, 4}, 16, Mask::causal_upper_left);
  sdpatest::expect_planted_caught("host.flash_varlen_key_offset", two);
  // max_alignment where Sk_b − Sq_b differs from max_k − max_q under lower-right causal.
  const auto lr = varlen(DType::bf16, 2, 2, {1, 8}, {16, 8}, 16, Mask::causal_lower_right);
  sdpatest::expect_planted_caught("host.flash_varlen_max_alignment", lr);
  // And only there: no mask sees every key whatever the offset; one sequence has no neighbour;
  // equal offsets align the same; the bugs are varlen's.
  const auto nomask = varlen(DType::bf16, 2, 2, {1, 8}, {16, 8}, 16, Mask::none);
  EXPECT_FALSE(builtin_registry().impl("host.flash_varlen_max_alignment")->supports(nomask, host).ok);
  const auto single = varlen(DType::bf16, 2, 2, {5}, {9}, 16, Mask::none);
  EXPECT_FALSE(builtin_registry().impl("host.flash_varlen_key_offset")->supports(single, host).ok);
  const auto same = varlen(DType::bf16, 2, 2, {3, 8}, {11, 16}, 16, Mask::causal_lower_right);
  EXPECT_FALSE(builtin_registry().impl("host.flash_varlen_max_alignment")->supports(same, host).ok);
  EXPECT_FALSE(builtin_registry()
                   .impl("host.flash_varlen_key_offset")
                   ->supports(make(DType::bf16, 2, 2, 2, 8, 8, 16, Mask::none), host)
                   .ok);
  // The dense bugs run per sequence: a GQA slip is caught on a packed batch.
  sdpatest::expect_planted_caught("host.flash_gqa_modulo", varlen(DType::bf16, 6, 2, {3, 9}, {7, 9}, 16, Mask::none));
  // A sequence of queries and no keys: its rows must give O = 0; the NaN plant shows there.
  sdpatest::expect_planted_caught("host.flash_masked_row_nan",
                                  varlen(DType::bf16, 2, 2, {3, 2}, {4, 0}, 16, Mask::none));
}

TEST(SdpaVarlenPadding, IdYamlAndErrors) {
  sdpa::Problem p = varlen(DType::bf16, 4, 2, {1, 7}, {30, 7}, 64, Mask::causal_lower_right);
  p.pad_k = 5;
  EXPECT_EQ(sdpa::problem_id(p), "bf16_b2_hq4_hkv2_sq1x7_sk30x7_d64_causal_lr_varlen_padk5");
  EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(p)), p);
  EXPECT_EQ(p.total_k(), 47);
  EXPECT_EQ(sdpa::cu_seqlens_k(p), (std::vector<int64_t>{0, 35, 47}));
  const ProblemPtr pp = family().parse(YAML::Load(
      "{dtype: bf16, heads: {q: 4, kv: 2}, seq: {q: [1, 7], k: [30, 7]}, head_dim: 64, mask: causal_lower_right, "
      "layout: varlen, pad_k: 5}"));
  EXPECT_EQ(pp->as<sdpa::Problem>(), p);
  const std::string base = "dtype: bf16, heads: 2, head_dim: 64";
  for (const char* extra : {"seq: 8, pad_k: 2", "seq: {q: [1], k: [3]}, layout: varlen, pad_k: -1",
                            "seq: {q: [1], k: [3]}, layout: paged, page_size: 16, pad_k: 2"}) {
    const std::string err = parse_error("{" + base + ", " + extra + "}");
    EXPECT_NE(err.find("pad_k"), std::string::npos) << extra << " -> '" << err << "'";
  }
  // seqused_k is corruptible only where it is an input: a padded varlen problem, or paged.
  EXPECT_NE(parse_error("{" + base + ", seq: {q: [1], k: [3]}, layout: varlen, corrupt: seqused_k}").find("seqused_k"),
            std::string::npos);
  sdpa::Problem bad = p;
  bad.corrupt = sdpa::Corrupt::seqused_k;
  EXPECT_NO_THROW(bad.validate());
  EXPECT_EQ(sdpa::contract_violation(bad)->argument, "seqused_k");
}

TEST(SdpaVarlenPadding, InputsCountPaddingInCuSeqlensKAndPoisonIt) {
  sdpa::Problem p = varlen(DType::bf16, 2, 1, {2, 0, 3}, {4, 0, 5}, 8, Mask::none);
  p.pad_k = 2;
  const TensorMap in = inputs_of(p);
  EXPECT_EQ(in.at("k").shape(), (std::vector<int64_t>{15, 1, 8}));
  EXPECT_EQ(in.at("cu_seqlens_k").to_f64(), (std::vector<double>{0, 6, 8, 15}));
  EXPECT_EQ(in.at("seqused_k").dtype(), DType::int32);
  EXPECT_EQ(in.at("seqused_k").to_f64(), (std::vector<double>{4, 0, 5}));
  for (int64_t row = 0; row < 15; ++row) {
    const bool padding = row == 4 || row == 5 || row == 6 || row == 7 || row == 13 || row == 14;
    EXPECT_EQ(std::isnan(in.at("k").get(row * 8 + 3)), padding) << row;
    EXPECT_EQ(std::isnan(in.at("v").get(row * 8 + 7)), padding) << row;
  }
  EXPECT_EQ(inputs_of(varlen(DType::bf16, 2, 1, {2}, {4}, 8, Mask::none)).count("seqused_k"), 0u);
  sdpa::Problem bad = p;
  bad.corrupt = sdpa::Corrupt::seqused_k;
  EXPECT_EQ(inputs_of(bad).at("seqused_k").get(0), 7.0);  // one past sequence 0's segment of 6 rows
}

TEST(SdpaVarlenPadding, HostFlashReadsSequsedKAndRefusesOneBeyondItsSegment) {
  sdpa::Problem p = varlen(DType::bf16, 2, 2, {3, 4}, {5, 6}, 16, Mask::causal_lower_right);
  p.pad_k = 2;
  const ArchInfo host{"host", "host"};
  const Impl* impl = builtin_registry().impl("host.flash");
  TensorMap in = inputs_of(p);
  in.at("seqused_k").set(1, 9);  // sequence 1's segment holds 8 rows
  try {
    impl->run(p, in, RunContext{&host, -1});
    ADD_FAILURE() << "seqused_k past its segment accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument, "seqused_k");
  }
  // The padding's dK and dV rows are 0: no output depends on them.
  p.direction = sdpa::Direction::backward;
  const TensorMap out = impl->run(p, inputs_of(p), RunContext{&host, -1});
  for (int64_t row : {5, 6, 13, 14})
    for (int64_t e = 0; e < 2 * 16; ++e) ASSERT_EQ(out.at("dK").get(row * 2 * 16 + e), 0.0) << row;
}

TEST(SdpaVarlenPadding, IgnoringSequsedKIsCaughtWhereARowReachesThePadding) {
  const ArchInfo host{"host", "host"};
  const Impl* plant = builtin_registry().impl("host.flash_varlen_seqused_ignored");
  for (sdpa::Problem p : varlen_variants(DType::bf16))
    for (auto dir : {sdpa::Direction::forward, sdpa::Direction::backward}) {
      p.direction = dir;
      EXPECT_EQ(plant->supports(p, host).ok, p.pad_k > 0) << sdpa::problem_id(p);
      if (p.pad_k > 0) sdpatest::expect_planted_caught("host.flash_varlen_seqused_ignored", p);
    }
  // Upper-left rows that end before a sequence's last key never reach its padding.
  sdpa::Problem ul = varlen(DType::bf16, 2, 2, {3, 4}, {8, 9}, 16, Mask::causal_upper_left);
  ul.pad_k = 4;
  EXPECT_FALSE(plant->supports(ul, host).ok);
}

// An impl built against ABI 1.0 reads layout THD as BHSD: opcts must not give it varlen.
int32_t yes(const void*, const void*, const opcts_arch*, char*, size_t) { return 1; }
opcts_status never_run(const void*, const opcts_run_args*, opcts_report*) { return OPCTS_INTERNAL; }

TEST(SdpaVarlenAbi, ImplsOfAnEarlierMinorVersionSkipVarlen) {
  const ArchInfo host{"host", "host"};
  const sdpa::Problem p = varlen(DType::bf16, 2, 2, {3, 4}, {5, 6}, 16, Mask::none);
  const sdpa::Problem dense = make(DType::bf16, 1, 2, 2, 5, 5, 16, Mask::none);
  // A 1.0-sized descriptor followed by bytes that are not the plugin's: they must not be read.
  alignas(opcts_impl_desc) unsigned char raw[sizeof(opcts_impl_desc)];
  std::memset(raw, 0xFF, sizeof raw);
  opcts_impl_desc d{};
  d.struct_size = offsetof(opcts_impl_desc, abi_minor);
  d.family = "sdpa", d.name = "test.old", d.backend = "host", d.supports = yes, d.run = never_run;
  std::memcpy(raw, &d, d.struct_size);
  Registry reg;
  register_sdpa_family(reg);
  reg.add(std::make_unique<AbiImpl>(*reinterpret_cast<const opcts_impl_desc*>(raw), &host_abi_backend()));
  const Impl& old = *reg.impl("test.old");
  const Support s = old.supports(p, host);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("ABI 1.1"), std::string::npos) << s.reason;
  EXPECT_TRUE(old.supports(dense, host).ok);
  // Negative cases skip supports(): the runner asks abi_gap, and run refuses to hand it over.
  EXPECT_NE(old.abi_gap(p).find("ABI 1.1"), std::string::npos);
  EXPECT_EQ(old.abi_gap(dense), "");
  EXPECT_THROW(old.run(p, TensorMap{}, RunContext{&host, -1}), std::logic_error);
  d.struct_size = sizeof d;
  d.abi_minor = OPCTS_PLUGIN_ABI_MINOR;
  d.name = "test.current";
  reg.add(std::make_unique<AbiImpl>(d, &host_abi_backend()));
  EXPECT_TRUE(reg.impl("test.current")->supports(p, host).ok);
  // A 1.2 impl knows varlen but not seqused_k: it would read the padding rows as keys.
  sdpa::Problem padded = p;
  padded.pad_k = 2;
  d.abi_minor = 2;
  d.name = "test.paged_era";
  reg.add(std::make_unique<AbiImpl>(d, &host_abi_backend()));
  EXPECT_TRUE(reg.impl("test.paged_era")->supports(p, host).ok);
  EXPECT_NE(reg.impl("test.paged_era")->abi_gap(padded).find("ABI 1.3"), std::string::npos);
}

}  // namespace
}  // namespace opcts
