// Catalog samples (runner/catalog_sample.hpp): pinned ids for a seed, tiers as prefixes, the
// distributions' ranges and ties, overrides, and errors that name the line.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/yaml_util.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::temp_dir;
using testutil::write;

const char* kSample =
    "family: sdpa\n"                                                          // 1
    "samples:\n"                                                              // 2
    "  - name: shapes\n"                                                      // 3
    "    why: seeded shapes\n"                                                // 4
    "    seed: 1\n"                                                           // 5
    "    count: {smoke: 3, default: 8}\n"                                     // 6
    "    axes:\n"                                                             // 7
    "      dtype: {choice: [fp16, bf16, fp32], weights: [2, 2, 1]}\n"         // 8
    "      batch: {uniform: [1, 3]}\n"                                        // 9
    "      heads.q: {choice: [1, 2, 4, 8]}\n"                                 // 10
    "      heads.kv: {divisor_of: heads.q}\n"                                 // 11
    "      seq.q: {log_uniform: [1, 300]}\n"                                  // 12
    "      seq.k: {log_uniform: [1, 300]}\n"                                  // 13
    "      head_dim: {choice: [32, 64, 80, 128]}\n"                           // 14
    "      mask: {choice: [none, causal_upper_left, causal_lower_right]}\n";  // 15

std::vector<SampledProblem> sample(const std::string& text, const SampleOverride& o = {}) {
  const std::string dir = temp_dir();
  return sample_catalogs(builtin_registry(), {write(dir, "s.yaml", text)}, "sdpa", o);
}

std::string sample_error(const std::string& text) {
  const std::string dir = temp_dir();
  const std::string path = write(dir, "s.yaml", text);
  return testutil::yaml_error_of([&] { load_catalogs(builtin_registry(), {path}); });
}

// The same seed gives these ids on every machine: integer and exact double arithmetic on
// Philox bits, no libm. A change here changes every sampled tier: bump it only on purpose.
TEST(CatalogSample, ASeedGivesPinnedIdsAndTiersArePrefixes) {
  const auto draws = sample(kSample);
  const std::vector<std::string> want = {
      "fp16_b3_hq4_hkv2_sq6_sk1_d128_causal_ul",   "fp32_b1_hq2_hkv2_sq82_sk175_d80_nomask",
      "bf16_b3_hq2_hkv1_sq25_sk9_d32_nomask",      "fp16_b3_hq8_hkv1_sq127_sk1_d80_nomask",
      "fp16_b2_hq8_hkv2_sq7_sk102_d32_causal_ul",  "fp32_b2_hq1_hkv1_sq22_sk19_d80_nomask",
      "fp16_b2_hq2_hkv2_sq148_sk1_d128_causal_lr", "fp16_b3_hq8_hkv2_sq1_sk69_d32_causal_ul"};
  ASSERT_EQ(draws.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(draws[i].problem_id, want[i]) << "draw " << i;
    EXPECT_EQ(draws[i].draw.index, static_cast<int64_t>(i));
    EXPECT_EQ(draws[i].draw.tier, i < 3 ? Tier::smoke : Tier::default_) << "draw " << i;
    EXPECT_EQ(draws[i].block, "shapes");
  }
  // In the catalog they are entries like grid points, each naming its block and draw.
  const std::string dir = temp_dir();
  const auto entries = load_catalogs(builtin_registry(), {write(dir, "s.yaml", kSample)});
  ASSERT_EQ(entries.size(), want.size());
  EXPECT_EQ(entries[4].problem_id, want[4]);
  EXPECT_EQ(entries[4].tier, Tier::default_);
  EXPECT_NE(entries[4].source.find("s.yaml:3 (sample 'shapes' draw 4)"), std::string::npos) << entries[4].source;
  EXPECT_EQ(entries[4].why, "seeded shapes");
}

TEST(CatalogSample, TheSeedAndCountCanBeReplacedAndTheNameKeysTheStream) {
  const auto base = sample(kSample);
  const auto again = sample(kSample, {std::nullopt, std::nullopt});
  ASSERT_EQ(base.size(), again.size());
  for (size_t i = 0; i < base.size(); ++i) EXPECT_EQ(base[i].problem_id, again[i].problem_id);
  // --count N draws N, whose first ones are the block's own (one sequence per seed).
  const auto more = sample(kSample, {std::nullopt, 20});
  ASSERT_EQ(more.size(), 20u);
  for (size_t i = 0; i < base.size(); ++i) EXPECT_EQ(more[i].problem_id, base[i].problem_id);
  // Another seed or another block name draws another sequence.
  const auto seeded = sample(kSample, {7, std::nullopt});
  std::string renamed = kSample;
  renamed.replace(renamed.find("name: shapes"), 12, "name: others");
  const auto named = sample(renamed);
  int same_seed = 0, same_name = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    same_seed += seeded[i].problem_id == base[i].problem_id;
    same_name += named[i].problem_id == base[i].problem_id;
  }
  EXPECT_LE(same_seed, 1);
  EXPECT_LE(same_name, 1);
}

// The distributions keep their ranges and ties over many draws, and reach both ends.
TEST(CatalogSample, DistributionsStayInRangeAndReachTheirEnds) {
  const std::string text =
      "family: sdpa\n"
      "samples:\n"
      "  - name: wide\n"
      "    why: ranges\n"
      "    seed: 3\n"
      "    count: 400\n"
      "    axes:\n"
      "      dtype: {choice: [fp16, bf16], weights: [1, 0]}\n"
      "      heads.q: {choice: [12, 7]}\n"
      "      heads.kv: {divisor_of: heads.q}\n"
      "      seq.q: {log_uniform: [1, 4096]}\n"
      "      seq.k: {uniform: [5, 9]}\n"
      "      batch: {log_uniform: [3, 20], step: 4}\n"
      "      head_dim: 64\n"
      "    fixed: {head_dim: 64}\n";
  EXPECT_NE(sample_error(text).find("'head_dim' is both an axis and in 'fixed'"), std::string::npos);
  std::string ok = text;
  ok.replace(ok.find("      head_dim: 64\n"), 19, "");
  const auto draws = sample(ok);
  ASSERT_EQ(draws.size(), 400u);
  std::set<int64_t> kv_of_12, kv_of_7, seq_k, batch;
  int64_t short_q = 0, long_q = 0;
  for (const auto& d : draws) {
    const YAML::Node& p = d.draw.point;
    EXPECT_EQ(p["dtype"].Scalar(), "fp16");  // weight 0 is never drawn
    const int64_t q = p["heads"]["q"].as<int64_t>(), kv = p["heads"]["kv"].as<int64_t>();
    EXPECT_EQ(q % kv, 0) << d.problem_id;
    (q == 12 ? kv_of_12 : kv_of_7).insert(kv);
    const int64_t sq = p["seq"]["q"].as<int64_t>();
    EXPECT_GE(sq, 1);
    EXPECT_LE(sq, 4096);
    short_q += sq < 4;
    long_q += sq >= 1024;
    seq_k.insert(p["seq"]["k"].as<int64_t>());
    batch.insert(p["batch"].as<int64_t>());
  }
  EXPECT_EQ(kv_of_12, (std::set<int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(kv_of_7, (std::set<int64_t>{1, 7}));
  EXPECT_EQ(seq_k, (std::set<int64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(batch, (std::set<int64_t>{4, 8, 12, 16, 20}));  // the multiples of 4 in [3, 20]
  // 13 octaves: about 400/13 ≈ 31 draws each for [1, 2) and [2, 4), and for [1024, 2048) and
  // [2048, 4096): a uniform draw would put 75% above 1024 and almost none below 4.
  EXPECT_GT(short_q, 30);
  EXPECT_LT(long_q, 110);
  EXPECT_GT(long_q, 30);
}

// From lo = 0 a log-uniform axis draws 0 as an octave of its own (cast's random counts reach the
// empty conversion that way): as often as 1 or as 2–3, and [0, 0] draws only 0.
TEST(CatalogSample, ALogUniformAxisFromZeroDrawsZeroAsAnOctave) {
  const std::string text =
      "family: sdpa\n"
      "samples:\n"
      "  - name: empty\n"
      "    why: zero-length keys\n"
      "    seed: 5\n"
      "    count: 400\n"
      "    axes:\n"
      "      seq.q: {log_uniform: [1, 100]}\n"
      "      seq.k: {log_uniform: [0, 100]}\n"
      "      batch: {log_uniform: [0, 0]}\n"
      "    fixed: {dtype: fp16, heads: {q: 2, kv: 2}, head_dim: 64}\n";
  const auto draws = sample(text);
  ASSERT_EQ(draws.size(), 400u);
  int64_t zero = 0, one = 0, low = 0;
  for (const auto& d : draws) {
    const int64_t sk = d.draw.point["seq"]["k"].as<int64_t>();
    EXPECT_GE(sk, 0);
    EXPECT_LE(sk, 100);
    EXPECT_EQ(d.draw.point["batch"].as<int64_t>(), 0);
    zero += sk == 0;
    one += sk == 1;
    low += sk == 2 || sk == 3;
  }
  // 8 octaves (0, 1, 2–3, ..., 64–100): about 50 draws each.
  for (const int64_t n : {zero, one, low}) {
    EXPECT_GT(n, 25);
    EXPECT_LT(n, 80);
  }
}

// `variants` makes each draw one problem per value (a backward problem and its forward twin),
// without changing the draws themselves.
TEST(CatalogSample, VariantsRepeatEachDrawOncePerValue) {
  const auto plain = sample(kSample);
  const auto twins = sample(std::string(kSample) + "    variants: {direction: [forward, backward]}\n");
  ASSERT_EQ(twins.size(), 2 * plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(twins[2 * i].problem_id, plain[i].problem_id);
    EXPECT_EQ(twins[2 * i + 1].problem_id, plain[i].problem_id + "_bwd");
    EXPECT_EQ(twins[2 * i + 1].draw.index, static_cast<int64_t>(i));
    EXPECT_EQ(twins[2 * i + 1].draw.tier, plain[i].draw.tier);
  }
  EXPECT_NE(sample_error(std::string(kSample) + "    variants: {mask: [none]}\n").find("both a variant and an axis"),
            std::string::npos);
}

TEST(CatalogSample, MalformedBlocksNameTheirLine) {
  const auto with = [](const std::string& from, const std::string& to) {
    std::string t = kSample;
    t.replace(t.find(from), from.size(), to);
    return sample_error(t);
  };
  EXPECT_NE(with("{uniform: [1, 3]}", "{gauss: [1, 3]}").find("s.yaml:9:"), std::string::npos);
  EXPECT_NE(with("weights: [2, 2, 1]", "weights: [2, 2]").find("3 choices and needs as many weights"),
            std::string::npos);
  EXPECT_NE(with("{divisor_of: heads.q}", "{divisor_of: seq.q}").find("no axis listed before it"), std::string::npos);
  EXPECT_NE(with("{smoke: 3, default: 8}", "{smoke: 9, default: 8}").find("below a smaller tier's 9"),
            std::string::npos);
  EXPECT_NE(with("{smoke: 3, default: 8}", "1000000").find("count must be in [0, 100000]"), std::string::npos);
  EXPECT_NE(with("{log_uniform: [1, 300]}", "{log_uniform: [-1, 300]}").find("needs lo >= 0"), std::string::npos);
  EXPECT_NE(with("{uniform: [1, 3]}", "{uniform: [3, 1]}").find("lo 3 is above hi 1"), std::string::npos);
  EXPECT_NE(with("{uniform: [1, 3]}", "{uniform: [1, 3], step: 4}").find("holds no multiple of the step 4"),
            std::string::npos);
  EXPECT_NE(with("{divisor_of: heads.q}", "{divisor_of: heads.q, step: 2}").find("step goes with uniform"),
            std::string::npos);
  EXPECT_NE(with("    why: seeded shapes\n", "").find("needs a 'why:'"), std::string::npos);
  EXPECT_NE(with("    seed: 1\n", "").find("needs a 'seed:'"), std::string::npos);
  // A block the family refuses at every attempt names the draw and the family's reason.
  const std::string refused = with("{divisor_of: heads.q}", "{choice: [3]}");
  EXPECT_NE(refused.find("s.yaml:3:"), std::string::npos) << refused;
  EXPECT_NE(refused.find("sample 'shapes' draw 0: the family refused all 50 attempts"), std::string::npos) << refused;
}

}  // namespace
}  // namespace opcts
