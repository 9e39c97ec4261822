// SDPA over a paged KV cache: ids and YAML, the cache the inputs build (every owned slot finite,
// every other NaN, pages scattered), the references against a naive forward that walks the
// block table itself, host.flash's split-KV run in both page orders, the planted paged bugs and
// the negative cases written into the index inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <yaml-cpp/yaml.h>
#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "families/sdpa/sdpa.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"

namespace opcts {
namespace {

using sdpa::Mask;
using sdpatest::family;
using sdpatest::inputs_of;
using sdpatest::make;
using sdpatest::parse_error;

sdpa::Problem paged(std::vector<int64_t> lq, std::vector<int64_t> lk, int64_t page, Mask m,
                    sdpa::KvLayout kv = sdpa::KvLayout::nhd, DType t = DType::bf16) {
  sdpa::Problem p = make(t, static_cast<int64_t>(lq.size()), 4, 2, 0, 0, 16, m);
  p.layout = sdpa::Layout::paged;
  p.page_size = page;
  p.kv_layout = kv;
  for (int64_t x : lq) p.seq_q = std::max(p.seq_q, x);
  for (int64_t x : lk) p.seq_k = std::max(p.seq_k, x);
  p.seqlens_q = std::move(lq);
  p.seqlens_k = std::move(lk);
  return p;
}

TEST(SdpaPagedId, RoundTripsWithPageLayoutAndCorruption) {
  const auto p = paged({1, 1, 33}, {15, 300, 48}, 16, Mask::causal_lower_right, sdpa::KvLayout::hnd);
  EXPECT_EQ(sdpa::problem_id(p), "bf16_b3_hq4_hkv2_sq1r2x33_sk15x300x48_d16_causal_lr_paged_page16_hnd");
  auto bad = paged({1, 1}, {20, 40}, 16, Mask::none);
  bad.corrupt = sdpa::Corrupt::block_table;
  EXPECT_EQ(sdpa::problem_id(bad), "bf16_b2_hq4_hkv2_sq1r2_sk20x40_d16_nomask_paged_page16_corrupt_block_table");
  for (const sdpa::Problem& x : {p, bad}) EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(x)), x);
  EXPECT_EQ(family().expected_error(bad), "block_table");
}

TEST(SdpaPagedYaml, ErrorsNameTheField) {
  const std::string base = "dtype: bf16, heads: 2, head_dim: 64, seq: {q: [1, 2], k: [30, 40]}";
  const std::pair<const char*, const char*> cases[] = {
      {"layout: paged", "page_size"},
      {"layout: varlen, page_size: 16", "page_size"},
      {"layout: paged, page_size: 0", "page_size"},
      {"layout: varlen, kv_layout: hnd", "kv_layout"},
      {"layout: paged, pagesize: 16", "did you mean 'page_size'"},
      {"layout: paged, page_size: 16, direction: backward", "forward only"},
      {"layout: paged, page_size: 16, corrupt: cu_seqlens_k", "corrupt"},
      {"layout: varlen, corrupt: block_table", "corrupt"},
      {"layout: paged, page_size: 16, corrupt: table", "corrupt"},
      {"layout: paged, page_size: 16, corrupt: seqused_k", "expect_error: seqused_k"},
  };
  for (const auto& [extra, needle] : cases) {
    const std::string err = parse_error("{" + base + ", " + extra + "}");
    EXPECT_NE(err.find(needle), std::string::npos) << extra << " -> '" << err << "'";
  }
  EXPECT_EQ(parse_error("{" + base + ", layout: paged, page_size: 16, corrupt: seqused_k, expect_error: seqused_k}"),
            "");
}

// Each owned slot holds a finite key (its page reached through the table once), every other slot
// of the cache NaN; the owned pages are all different and not in table order.
TEST(SdpaPagedInputs, OwnedSlotsFiniteTheRestNaN) {
  for (const auto kv : {sdpa::KvLayout::nhd, sdpa::KvLayout::hnd}) {
    const auto p = paged({1, 3, 0}, {21, 5, 16}, 8, Mask::none, kv);
    const TensorMap in = inputs_of(p);
    const sdpa::PagedGeometry g = sdpa::paged_geometry(p);
    EXPECT_EQ(g.pages, (std::vector<int64_t>{3, 1, 2}));
    EXPECT_EQ(g.num_pages, 6 + 6 / 4 + 1);
    const HostTensor &table = in.at("block_table"), &kc = in.at("k_cache");
    EXPECT_EQ(table.shape(), (std::vector<int64_t>{3, 3}));
    EXPECT_EQ(in.at("seqused_k").to_f64(), (std::vector<double>{21, 5, 16}));
    std::set<int64_t> owned;
    std::vector<char> finite(static_cast<size_t>(g.num_pages * p.page_size), 0);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t j = 0; j < p.seqlens_k[b]; ++j) {
        const auto page = static_cast<int64_t>(table.get(b * 3 + j / 8));
        owned.insert(page);
        finite[page * 8 + j % 8] = 1;
      }
    EXPECT_EQ(owned.size(), 6u);
    bool in_order = true;
    for (int64_t j = 0; j < 3; ++j) in_order = in_order && table.get(j) == j;
    EXPECT_FALSE(in_order) << "pages dealt in order";
    for (int64_t page = 0; page < g.num_pages; ++page)
      for (int64_t slot = 0; slot < 8; ++slot)
        for (int64_t h = 0; h < 2; ++h)
          EXPECT_EQ(std::isnan(kc.get(sdpa::cache_index(p, page, slot, h, 5, 16))), !finite[page * 8 + slot])
              << page << " " << slot;
    // Unused entries (sequence 1's second and third) point at pages no one owns.
    EXPECT_EQ(owned.count(static_cast<int64_t>(table.get(1 * 3 + 1))), 0u);
  }
}

// A shared prefix: every sequence's first entries name the same pages, which count once.
TEST(SdpaPagedInputs, ASharedPrefixIsTheSamePagesInEveryRow) {
  auto p = paged({1, 3, 1}, {33, 40, 32}, 8, Mask::causal_lower_right);
  p.shared_prefix = 32;
  EXPECT_EQ(sdpa::problem_id(p), "bf16_b3_hq4_hkv2_sq1x3x1_sk33x40x32_d16_causal_lr_paged_page8_prefix32");
  EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(p)), p);
  const sdpa::PagedGeometry g = sdpa::paged_geometry(p);
  EXPECT_EQ(g.shared, 4);
  EXPECT_EQ(g.owned, 4 + 1 + 1 + 0);
  const TensorMap in = inputs_of(p);
  const HostTensor& t = in.at("block_table");
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(t.get(0 * 5 + j), t.get(1 * 5 + j)) << j;
    EXPECT_EQ(t.get(0 * 5 + j), t.get(2 * 5 + j)) << j;
  }
  EXPECT_NE(t.get(0 * 5 + 4), t.get(1 * 5 + 4));
  std::string why;
  EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << why;
  sdpatest::expect_planted_caught("host.flash_paged_page_offset", p);
  const std::string base = "dtype: bf16, heads: 2, head_dim: 64, layout: paged, page_size: 8, seq: {q: [1, 1], k: ";
  EXPECT_NE(parse_error("{" + base + "[40, 40]}, shared_prefix: 12}").find("shared_prefix"), std::string::npos);
  EXPECT_NE(parse_error("{" + base + "[40, 8]}, shared_prefix: 16}").find("shared_prefix"), std::string::npos);
  EXPECT_EQ(parse_error("{" + base + "[40, 16]}, shared_prefix: 16}"), "");
}

// A sequence's dense problem carries nothing of the packed layout: it is a valid dense problem.
TEST(SdpaPagedProblem, ASequenceIsAValidDenseProblem) {
  auto p = paged({1, 3}, {33, 40}, 8, Mask::causal_lower_right, sdpa::KvLayout::hnd);
  p.shared_prefix = 32;
  p.corrupt = sdpa::Corrupt::seqused_k;
  for (int64_t b = 0; b < 2; ++b) {
    const sdpa::Problem s = p.sequence(b);
    EXPECT_NO_THROW(s.validate()) << b;
    EXPECT_FALSE(sdpa::contract_violation(s)) << b;
    EXPECT_EQ(s.seq_k, p.seqlens_k[b]);
    EXPECT_EQ(s.layout, sdpa::Layout::bshd);
  }
}

// A naive forward that walks the block table itself: O and lse of every sequence.
TEST(SdpaPagedReference, MatchesANaiveForwardThroughTheBlockTable) {
  for (const auto kv : {sdpa::KvLayout::nhd, sdpa::KvLayout::hnd}) {
    auto p = paged({2, 5, 1}, {30, 5, 9}, 4, Mask::causal_lower_right, kv, DType::fp32);
    p.window_left = 6;
    const TensorMap in = inputs_of(p);
    const References r = family().reference(p, in);
    const HostTensor &q = in.at("q"), &kc = in.at("k_cache"), &vc = in.at("v_cache"), &t = in.at("block_table");
    const int64_t Tq = p.total_q(), width = t.dim(1);
    int64_t q0 = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t sq = p.seqlens_q[b], sk = p.seqlens_k[b];
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          std::vector<double> s(sk, -INFINITY);
          double m = -INFINITY;
          for (int64_t j = std::max<int64_t>(0, i + sk - sq - 6); j <= i + sk - sq && j < sk; ++j) {
            const auto page = static_cast<int64_t>(t.get(b * width + j / 4));
            double dot = 0;
            for (int64_t d = 0; d < 16; ++d)
              dot += q.get(((q0 + i) * 4 + h) * 16 + d) * kc.get(sdpa::cache_index(p, page, j % 4, h / 2, d, 16));
            s[j] = dot / 4.0;
            m = std::max(m, s[j]);
          }
          double l = 0;
          for (double x : s) l += std::isinf(x) ? 0 : std::exp(x - m);
          ASSERT_NEAR(r.exact.at("lse")[h * Tq + q0 + i], m + std::log(l), 1e-12) << b << " " << h << " " << i;
          for (int64_t d = 0; d < 16; ++d) {
            double o = 0;
            for (int64_t j = 0; j < sk; ++j)
              if (!std::isinf(s[j]))
                o += std::exp(s[j] - m) / l *
                     vc.get(sdpa::cache_index(p, static_cast<int64_t>(t.get(b * width + j / 4)), j % 4, h / 2, d, 16));
            ASSERT_NEAR(r.exact.at("O")[((q0 + i) * 4 + h) * 16 + d], o, 1e-12);
          }
        }
      q0 += sq;
    }
  }
}

std::vector<sdpa::Problem> paged_variants(DType t) {
  std::vector<sdpa::Problem> v;
  v.push_back(paged({1, 1, 0, 33, 2}, {15, 300, 9, 48, 0}, 7, Mask::causal_lower_right, sdpa::KvLayout::nhd, t));
  v.push_back(paged({1, 4, 20}, {600, 17, 20}, 16, Mask::causal_lower_right, sdpa::KvLayout::hnd, t));
  v.push_back(paged({3, 8}, {513, 40}, 1, Mask::none, sdpa::KvLayout::nhd, t));
  auto w = paged({12, 3}, {4, 270}, 5, Mask::causal_upper_left, sdpa::KvLayout::hnd, t);
  w.window_left = 3, w.window_right = 2, w.softcap = 4;
  v.push_back(w);
  return v;
}

TEST(SdpaPagedHostFlash, PassesInBothPageOrdersAndEverySplit) {
  for (DType t : {DType::bf16, DType::fp16})
    for (const sdpa::Problem& p : paged_variants(t)) {
      std::string why;
      EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << sdpa::problem_id(p) << ": " << why;
    }
}

TEST(SdpaPagedPlanted, PageTailAndCombineBugsAreCaughtWhereTheyShow) {
  const ArchInfo host{"host", "host"};
  for (const sdpa::Problem& p : paged_variants(DType::bf16))
    for (const char* impl :
         {"host.flash_paged_page_offset", "host.flash_paged_tail_read", "host.flash_splitkv_combine_log2"})
      if (builtin_registry().impl(impl)->supports(p, host).ok) sdpatest::expect_planted_caught(impl, p);
  const auto decode = paged({1, 1}, {700, 33}, 16, Mask::causal_lower_right);
  for (const char* impl :
       {"host.flash_paged_page_offset", "host.flash_paged_tail_read", "host.flash_splitkv_combine_log2"})
    sdpatest::expect_planted_caught(impl, decode);
  // Where they cannot show: one-token pages have no tail; no row reads two splits; not paged.
  EXPECT_FALSE(builtin_registry()
                   .impl("host.flash_paged_tail_read")
                   ->supports(paged({1, 1}, {700, 33}, 1, Mask::causal_lower_right), host)
                   .ok);
  EXPECT_FALSE(builtin_registry()
                   .impl("host.flash_splitkv_combine_log2")
                   ->supports(paged({1, 1}, {256, 33}, 16, Mask::causal_lower_right), host)
                   .ok);
  EXPECT_FALSE(builtin_registry()
                   .impl("host.flash_paged_page_offset")
                   ->supports(make(DType::bf16, 1, 4, 2, 8, 8, 16, Mask::none), host)
                   .ok);
  // The dense bugs run per sequence on paged problems too.
  sdpatest::expect_planted_caught("host.flash_gqa_modulo", decode);
  sdpatest::expect_planted_caught("host.flash_lse_plus_log2", decode);
}

// The negative cases: host.flash refuses each corrupted index input by its name.
TEST(SdpaPagedNegative, HostFlashRefusesEachCorruptedIndexByName) {
  const ArchInfo host{"host", "host"};
  const Impl* impl = builtin_registry().impl("host.flash");
  for (const auto c : {sdpa::Corrupt::block_table, sdpa::Corrupt::seqused_k, sdpa::Corrupt::cu_seqlens_q}) {
    auto p = paged({3, 2, 4}, {20, 40, 5}, 16, Mask::none);
    p.corrupt = c;
    const std::string want(sdpa::kCorruptNames[static_cast<size_t>(c)]);
    ASSERT_EQ(family().expected_error(p), want);
    try {
      impl->run(p, inputs_of(p), RunContext{&host, -1});
      ADD_FAILURE() << want << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument, want) << e.what();
    }
  }
}

}  // namespace
}  // namespace opcts
