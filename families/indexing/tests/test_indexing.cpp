// The indexing families (scatter_add, index_add, index_select): ids, inputs, the exact reference, each accumulation
// model's bound against simulations of its arithmetic, host.omp on the smoke tier, negative cases and the planted host
// impls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "core/errors.hpp"
#include "families/indexing/indexing.hpp"
#include "judge/compare.hpp"
#include "judge/conservation.hpp"
#include "judge/tolerance.hpp"
#include "runner/catalog.hpp"
#include "runner/suite.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using indexing::Accumulation;
using indexing::BadIndex;
using indexing::Dist;
using indexing::Fill;
using indexing::Op;
using indexing::Problem;

const Family& family(Op op) { return *builtin_registry().family(indexing::to_string(op)); }

std::vector<CatalogEntry> catalog(const char* file) {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / file).string()});
}

int64_t index_of(const HostTensor& t, int64_t i) { return static_cast<int64_t>(t.get(i)); }

// Mismatches of `out` against the reference under one model's bound, both its sides (floats) or
// exactly, plus the groups its conservation check finds out of bound (runner/execute.cpp's
// judgement).
int64_t mismatches(const Problem& p, const References& ref, const HostTensor& out, Accumulation model) {
  std::vector<WorstElement> worst;
  Tolerance t;
  t.metric = p.op == Op::index_select ? Metric::bitexact : p.integer() ? Metric::exact : Metric::bounded;
  t.factor = 1;
  const std::string key = indexing::bound_key(model);
  const auto bd = ref.bound.find(key);
  const auto below = ref.bound_below.find(key);
  const auto cs = ref.conservation.find(key);
  const ConservationStats c =
      cs == ref.conservation.end() ? ConservationStats{} : check_conservation("out", out, cs->second);
  return compare_output("out", out,
                        {.want = ref.exact.at("out"),
                         .bound = bd == ref.bound.end() ? nullptr : &bd->second,
                         .bound_below = below == ref.bound_below.end() ? nullptr : &below->second},
                        t, worst)
             .mismatches +
         c.groups_off + (c.total_off ? 1 : 0);
}

int64_t run_mismatches(const Impl& impl, const Problem& p, Accumulation model) {
  const Family& f = family(p.op);
  const TensorMap in = f.make_inputs(p, case_seed(f, p));
  const References ref = f.reference(p, in);
  return mismatches(p, ref, impl.run(p, in, RunContext{&testutil::host_arch(), -1}).at("out"), model);
}

// ---- dtypes ------------------------------------------------------------------------------------

TEST(IndexingDtypes, Int32AndInt64AreExactTwosComplement) {
  EXPECT_EQ(encode(DType::int32, -1.0), 0xFFFFFFFFull);
  EXPECT_EQ(decode(DType::int32, 0x80000000ull), -2147483648.0);
  EXPECT_EQ(round_to(DType::int32, 3e9), 2147483647.0);  // saturates
  EXPECT_EQ(round_to(DType::int32, 2.5), 2.0);           // ties to even
  EXPECT_EQ(decode(DType::int64, encode(DType::int64, -0x1p52)), -0x1p52);
  EXPECT_EQ(encode(DType::int64, 0x1p40 + 3), (uint64_t{1} << 40) + 3);
  HostTensor t(DType::int64, {2});
  t.set(1, -12345678901.0);
  EXPECT_EQ(t.get(1), -12345678901.0);
  EXPECT_EQ(t.nbytes(), 16u);
  for (DType d : {DType::int32, DType::int64}) {
    EXPECT_TRUE(dtype_info(d).is_integer);
    EXPECT_EQ(dtype_of_abi(abi_dtype(d)), d);
  }
  EXPECT_EQ(abi_dtype(DType::int64).bits, 64);
  EXPECT_EQ(parse_dtype("int64"), DType::int64);
}

// ---- ids and validation -----------------------------------------------------------------------

TEST(IndexingId, SpellsTheFieldsInOrder) {
  const auto& sa = indexing::fields(Op::scatter_add);
  EXPECT_EQ(sa.id(Problem{.n = 100, .m = 1305301}), "fp32_i64_n100_m1305301_uniform");
  EXPECT_EQ(sa.id(Problem{.dtype = DType::fp16,
                          .index_dtype = DType::int32,
                          .n = 33,
                          .m = 64,
                          .dist = Dist::all_last,
                          .fill = Fill::ones,
                          .misalign = true}),
            "fp16_i32_n33_m64_alllast_ones_misalign");
  const auto& ia = indexing::fields(Op::index_add);
  const Problem p{.op = Op::index_add,
                  .dtype = DType::bf16,
                  .outer = 2,
                  .n = 29,
                  .m = 61,
                  .inner = 7,
                  .dist = Dist::zipf,
                  .alpha = -0.5,
                  .bad_index = BadIndex::wraps32,
                  .expect_error = "index"};
  EXPECT_EQ(ia.id(p), "bf16_i64_b2_n29_m61_h7_zipf_alpham0p5_badwrap32_expect_index");
  EXPECT_EQ(ia.parse_id(ia.id(p)), p);
  // A table reads its own family's problems only.
  EXPECT_EQ(indexing::fields(Op::index_select).parse_yaml(YAML::Load("{dtype: int32, n: 4, m: 2, dist: sorted}")).op,
            Op::index_select);
  EXPECT_THROW(ia.parse_yaml(YAML::Load("{dtype: fp32, n: 4, m: 2, dist: uniform, fill: ones, nonsense: 1}")),
               std::runtime_error);
}

TEST(IndexingId, ValidationNamesTheRule) {
  auto err = [](Op op, const char* yaml) {
    try {
      indexing::fields(op).parse_yaml(YAML::Load(yaml));
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err(Op::index_add, "{dtype: fp32, n: 4, m: 2, dist: uniform, alpha: 0.1}").find("8 significant bits"),
            std::string::npos);
  EXPECT_NE(err(Op::index_add, "{dtype: fp64, n: 4, m: 2, dist: uniform, alpha: 3}").find("power of two"),
            std::string::npos);
  EXPECT_NE(err(Op::index_add, "{dtype: int32, n: 4, m: 2, dist: uniform, alpha: 0.5}").find("integer"),
            std::string::npos);
  EXPECT_NE(err(Op::scatter_add, "{dtype: fp32, n: 4, m: 2, dist: uniform, misalign: true}").find("fp16 and bf16"),
            std::string::npos);
  EXPECT_NE(err(Op::index_add, "{dtype: fp32, n: 4, m: 10, dist: routed}").find("m = k·n"), std::string::npos);
  EXPECT_NE(
      err(Op::scatter_add, "{dtype: fp32, n: 4, m: 2, dist: uniform, bad_index: negative}").find("expect_error: index"),
      std::string::npos);
  EXPECT_NE(err(Op::scatter_add,
                "{dtype: fp32, index: int32, n: 4, m: 2, dist: uniform, bad_index: wraps32, expect_error: index}")
                .find("int64 index"),
            std::string::npos);
  EXPECT_NE(err(Op::scatter_add, "{dtype: fp32, n: 0, m: 2, dist: uniform}").find("n = 0"), std::string::npos);
  EXPECT_NE(err(Op::scatter_add, "{dtype: e4m3fn, n: 4, m: 2, dist: uniform}").find("dtype must be"),
            std::string::npos);
}

// ---- inputs -------------------------------------------------------------------------------------

TEST(IndexingInputs, DistributionsAreWhatTheyClaim) {
  const Problem base{.n = 50, .m = 4000};
  auto index = [&](Problem p) { return indexing::make_inputs(p, 7).at("index"); };
  Problem p = base;
  p.dist = Dist::all_last;
  for (int64_t i = 0; i < p.m; i += 97) EXPECT_EQ(index_of(index(p), i), 49);
  p.dist = Dist::strided;
  const HostTensor s = index(p);
  EXPECT_EQ(index_of(s, 0), 49);  // the last row first
  EXPECT_EQ(index_of(s, 1), 48);
  EXPECT_EQ(index_of(s, 50), 49);  // m > n cycles
  p = Problem{.outer = 2, .n = 9, .m = 40, .inner = 3, .dist = Dist::sorted};
  const HostTensor so = index(p);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 1; j < 40; ++j)
        EXPECT_LE(index_of(so, (o * 40 + j - 1) * 3 + k), index_of(so, (o * 40 + j) * 3 + k));
  // zipf: the hottest destination takes about m / H_n of the draws, far above m / n.
  p = Problem{.n = 1000, .m = 20000, .dist = Dist::zipf};
  const HostTensor z = index(p);
  std::vector<int> count(1000);
  for (int64_t i = 0; i < p.m; ++i) ++count[static_cast<size_t>(index_of(z, i))];
  EXPECT_GT(*std::max_element(count.begin(), count.end()), 10 * p.m / p.n);
  EXPECT_EQ(count[0] > 1000, false);  // the bijection moves rank 0 off index 0
  // routed: every token k times, tokens ascending within each expert's run.
  p = Problem{.op = Op::index_add, .n = 64, .m = 512, .dist = Dist::routed};
  const HostTensor r = indexing::make_inputs(p, 3).at("index");
  std::vector<int> per_token(64);
  int descents = 0;
  for (int64_t j = 0; j < p.m; ++j) {
    ++per_token[static_cast<size_t>(index_of(r, j))];
    if (j && index_of(r, j) < index_of(r, j - 1)) ++descents;  // a new expert's run starts
  }
  for (int c : per_token) EXPECT_EQ(c, 8);
  EXPECT_GT(descents, 20);
  EXPECT_LT(descents, 256);
}

TEST(IndexingInputs, FillsKeepSumsInRangeAndExact) {
  // fp16: |self| + Σ|src| of the hottest element stays below 2^13.
  const Problem h{.dtype = DType::fp16, .n = 3, .m = 100000, .dist = Dist::all_first};
  const TensorMap in = indexing::make_inputs(h, 1);
  double s = std::fabs(in.at("self").get(0));
  for (int64_t j = 0; j < h.m; ++j) s += std::fabs(in.at("src").get(j));
  EXPECT_LT(s, 8192);
  // Not scaled further than needed: σ is the largest power of two with 6σ·(m + 1) <= 2^13, so
  // σ > 2^13 / (12·(m + 1)) and Σ|src| ≈ m·σ·√(2/π) > 2^13·0.798 / 12 ≈ 545.
  EXPECT_GT(s, 512);
  // int64 values reach past int32, sums stay below 2^53.
  const Problem i{.dtype = DType::int64, .n = 10, .m = 1000};
  const TensorMap ii = indexing::make_inputs(i, 1);
  double big = 0;
  for (int64_t j = 0; j < i.m; ++j) big = std::max(big, std::fabs(ii.at("src").get(j)));
  EXPECT_GT(big, 0x1p31);
  EXPECT_LE(big * 1001, 0x1p53);
  // The same seed gives the same bytes; ones: src 1, self 0.
  const Problem c{.dtype = DType::bf16, .n = 4, .m = 10, .fill = Fill::ones};
  const TensorMap a = indexing::make_inputs(c, 5), b = indexing::make_inputs(c, 5);
  EXPECT_EQ(std::memcmp(a.at("index").data(), b.at("index").data(), a.at("index").nbytes()), 0);
  EXPECT_EQ(a.at("src").get(3), 1.0);
  EXPECT_EQ(a.at("self").get(2), 0.0);
}

TEST(IndexingInputs, BadIndexSitsInTheMiddle) {
  Problem p{.dtype = DType::fp32, .n = 37, .m = 301, .bad_index = BadIndex::wraps32, .expect_error = "index"};
  const HostTensor idx = indexing::make_inputs(p, 1).at("index");
  const auto v = static_cast<int64_t>(idx.get(150));
  EXPECT_GE(v, int64_t{1} << 32);
  EXPECT_LT(static_cast<int32_t>(v), 37);  // narrowed to 32 bits it reads as a valid index
  p.bad_index = BadIndex::negative;
  EXPECT_EQ(indexing::make_inputs(p, 1).at("index").get(150), -1);
}

TEST(IndexingInputs, SelectInputsAreFiniteCodes) {
  const Problem p{.op = Op::index_select, .dtype = DType::bf16, .n = 4096, .m = 1};
  const HostTensor in = indexing::make_inputs(p, 9).at("input");
  int subnormal = 0;
  for (int64_t i = 0; i < in.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(in.get(i))) << i;
    subnormal += in.get(i) != 0 && std::fabs(in.get(i)) < dtype_info(DType::bf16).min_normal;
  }
  EXPECT_GT(subnormal, 0);
}

// ---- the reference -------------------------------------------------------------------------------

TEST(IndexingReference, HandWorked) {
  // scatter_add of 1, 2, 4 into elements 2, 0, 2 of self = (10, 20, 30): (12, 20, 35).
  Problem p{.dtype = DType::fp32, .n = 3, .m = 3};
  TensorMap in;
  HostTensor self(DType::fp32, {1, 3, 1}), src(DType::fp32, {1, 3, 1}), index(DType::int64, {1, 3, 1});
  for (int i = 0; i < 3; ++i) {
    self.set(i, 10.0 * (i + 1));
    src.set(i, std::ldexp(1.0, i));
  }
  index.set(0, 2);
  index.set(1, 0);
  index.set(2, 2);
  in.emplace("self", self);
  in.emplace("src", src);
  in.emplace("index", index);
  References r = indexing::reference(p, in);
  EXPECT_EQ(r.exact.at("out"), (std::vector<double>{12, 20, 35}));
  for (Accumulation a : indexing::all_accumulations())
    for (double b : r.bound.at(indexing::bound_key(a))) EXPECT_EQ(b, 0) << "exact partial sums: bit-exact";
  // index_add of rows with alpha 2; index_select of rows.
  Problem q{.op = Op::index_add, .dtype = DType::int32, .n = 2, .m = 2, .inner = 2, .alpha = 2};
  TensorMap qi;
  HostTensor qs(DType::int32, {1, 2, 2}), qsrc(DType::int32, {1, 2, 2}), qidx(DType::int32, {2});
  for (int i = 0; i < 4; ++i) qsrc.set(i, i + 1);
  qidx.set(0, 1);
  qidx.set(1, 1);
  qi.emplace("self", qs);
  qi.emplace("source", qsrc);
  qi.emplace("index", qidx);
  EXPECT_EQ(indexing::reference(q, qi).exact.at("out"), (std::vector<double>{0, 0, 2 * (1 + 3), 2 * (2 + 4)}));
  Problem g{.op = Op::index_select, .dtype = DType::fp16, .n = 3, .m = 2, .inner = 2};
  TensorMap gi;
  HostTensor input(DType::fp16, {1, 3, 2}), gidx(DType::int64, {2});
  for (int i = 0; i < 6; ++i) input.set(i, i);
  gidx.set(0, 2);
  gidx.set(1, 0);
  gi.emplace("input", input);
  gi.emplace("index", gidx);
  EXPECT_EQ(indexing::reference(g, gi).exact.at("out"), (std::vector<double>{4, 5, 0, 1}));
}

// ---- the bounds against simulations of each model's arithmetic ----------------------------------

double rn(DType d, double x) { return round_to(d, x); }

struct Sim {
  DType d;
  double self;
  std::vector<double> terms;
  double exact() const { return std::accumulate(terms.begin(), terms.end(), self); }  // small cases: fine in double
  indexing::ElementSums sums(bool symmetric = false) const {
    return {d, self, terms.data(), static_cast<int64_t>(terms.size()), exact(), symmetric};
  }
  double per_add(std::mt19937& g) const {
    std::vector<double> t = terms;
    std::shuffle(t.begin(), t.end(), g);
    double r = self;
    for (double x : t) r = rn(d, r + x);
    return r;
  }
  double grouped(std::mt19937& g) const {  // random groups of 1-32, fp32 sums, one rounding each
    std::vector<double> t = terms;
    std::shuffle(t.begin(), t.end(), g);
    double r = self;
    for (size_t i = 0; i < t.size();) {
      const size_t len = std::min<size_t>(t.size() - i, 1 + g() % 32);
      float s = 0;
      for (size_t k = 0; k < len; ++k) s += static_cast<float>(t[i + k]);
      r = rn(d, r + rn(d, s));
      i += len;
    }
    return r;
  }
  // cuda.warp_aggregated: the terms at positions sharing pos / 32 summed in fp32 in lane order,
  // each sum rounded once and the groups added in a random order; `leader_only`, the planted
  // bug of a shuffle loop that never runs: each group adds its first lane's term alone.
  double warp32(std::mt19937& g, const std::vector<int64_t>& pos, bool leader_only = false) const {
    std::vector<double> sums;
    for (size_t a = 0; a < terms.size();) {
      size_t b = a;
      float f = 0;
      for (; b < terms.size() && pos[b] / 32 == pos[a] / 32; ++b) f += static_cast<float>(terms[b]);
      sums.push_back(leader_only ? terms[a] : rn(d, f));
      a = b;
    }
    std::shuffle(sums.begin(), sums.end(), g);
    double r = self;
    for (double x : sums) r = rn(d, r + x);
    return r;
  }
  double once(std::mt19937& g) const {  // fp32 in a random order, self anywhere, one rounding
    std::vector<double> t = terms;
    t.push_back(self);
    std::shuffle(t.begin(), t.end(), g);
    float s = 0;
    for (double x : t) s += static_cast<float>(x);
    return rn(d, s);
  }
};

Sim random_sim(DType d, int n, std::mt19937& g, bool positive) {
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0, 1);
  Sim s{d, rn(d, nd(g)), {}};
  for (int i = 0; i < n; ++i) s.terms.push_back(rn(d, positive ? ud(g) : nd(g)));
  return s;
}

// What the `bounded` metric allows one element: E, plus one output ulp when E > 0.
double allowed(DType d, double e, double want) { return e + (e > 0 ? spacing_at(d, std::fabs(want) + e) : 0.0); }

TEST(IndexingBound, EachModelCoversItsArithmeticInRandomOrders) {
  std::mt19937 g(11);
  for (DType d : {DType::bf16, DType::fp16, DType::fp32})
    for (int n : {1, 2, 7, 64, 1000})
      for (bool positive : {false, true}) {
        const Sim s = random_sim(d, n, g, positive);
        const auto b = indexing::bounds(s.sums());
        const double x = s.exact();
        for (int trial = 0; trial < 20; ++trial) {
          EXPECT_LE(std::fabs(s.per_add(g) - x), allowed(d, b[0], x)) << name(d) << " n " << n;
          EXPECT_LE(std::fabs(s.grouped(g) - x), allowed(d, b[1], x)) << name(d) << " n " << n;
          EXPECT_LE(std::fabs(s.once(g) - x), allowed(d, b[2], x)) << name(d) << " n " << n;
        }
        EXPECT_LE(b[0], b[1]);  // grouped allows every per_add result
      }
}

// warp32 (the groups of one warp's lanes known): every simulated kernel run stays inside it, it
// is per_add's bound where every group holds one term and a third of grouped's or less where
// warps hold 32, and a group that adds its leader's term alone exceeds it there.
TEST(IndexingBound, Warp32CoversTheWarpKernelAndIsTighterThanGrouped) {
  std::mt19937 g(17);
  for (DType d : {DType::bf16, DType::fp16, DType::fp32})
    for (int n : {64, 1000, 20000})
      for (int stride : {1, 3, 37}) {  // positions i·stride: groups of 32, 11 and 1 terms
        const Sim s = random_sim(d, n, g, false);
        std::vector<int64_t> pos(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int64_t>(i) * stride;
        for (bool symmetric : {false, true}) {
          indexing::ElementSums e = s.sums(symmetric);
          e.positions = pos.data();
          const auto b = indexing::bounds(e);
          const double x = s.exact();
          double seen = 0;
          for (int trial = 0; trial < (n >= 20000 ? 10 : 50); ++trial)
            seen = std::max(seen, std::fabs(s.warp32(g, pos) - x));
          SCOPED_TRACE(std::string(name(d)) + " n " + std::to_string(n) + " stride " + std::to_string(stride) +
                       (symmetric ? " symmetric" : ""));
          EXPECT_LE(seen, allowed(d, b[3], x));
          EXPECT_LE(b[3], b[1]);
          if (stride == 37) EXPECT_DOUBLE_EQ(b[3], b[0]);  // groups of one: one atomic per term
          if (stride == 1 && symmetric && n >= 1000) EXPECT_LT(b[3] * 3, b[1]);
        }
        indexing::ElementSums none = s.sums(true);  // no positions: grouped's bound
        EXPECT_EQ(indexing::bounds(none)[3], indexing::bounds(none)[1]);
        if (stride == 1 && n == 1000) {  // positive terms: leader-only groups lose 31/32 of the sum
          const Sim pos_sim = random_sim(d, n, g, true);
          indexing::ElementSums e = pos_sim.sums(false);
          e.positions = pos.data();
          const double x = pos_sim.exact();
          EXPECT_GT(std::fabs(pos_sim.warp32(g, pos, true) - x), allowed(d, indexing::bounds(e)[3], x)) << name(d);
        }
      }
}

// The probabilistic bound of symmetric fills (families/indexing/bound.cpp): every simulated order of
// every model stays inside it, where it is many times tighter than the worst case.
TEST(IndexingBound, ProbabilisticBoundCoversSymmetricFillsAndIsTighter) {
  std::mt19937 g(23);
  for (DType d : {DType::bf16, DType::fp16, DType::fp32})
    for (int n : {2, 64, 1000, 20000}) {
      const Sim s = random_sim(d, n, g, false);
      const auto worst = indexing::bounds(s.sums(false)), b = indexing::bounds(s.sums(true));
      const double x = s.exact();
      double seen[3] = {0, 0, 0};
      const int trials = n >= 20000 ? 20 : 200;
      for (int trial = 0; trial < trials; ++trial) {
        seen[0] = std::max(seen[0], std::fabs(s.per_add(g) - x));
        seen[1] = std::max(seen[1], std::fabs(s.grouped(g) - x));
        seen[2] = std::max(seen[2], std::fabs(s.once(g) - x));
      }
      for (int m = 0; m < 3; ++m) {
        EXPECT_LE(seen[m], allowed(d, b[m], x)) << name(d) << " n " << n << " model " << m;
        EXPECT_LE(b[m], worst[m]) << name(d) << " n " << n << " model " << m;  // never looser than the proof
      }
      if (n >= 1000) EXPECT_LT(b[0] * 10, worst[0]) << name(d) << " n " << n;  // contention: √n, not n
    }
}

// The probabilistic bound fails a lost update the proof admits: at n = 1000 in fp32 one term of a
// size between the two bounds (the one nearest their geometric mean) dropped by a per_add impl.
TEST(IndexingBound, ProbabilisticBoundCatchesALostUpdateTheProofAdmits) {
  std::mt19937 g(29);
  const Sim s = random_sim(DType::fp32, 1000, g, false);
  const double x = s.exact(), proof = indexing::bounds(s.sums(false))[0], b = indexing::bounds(s.sums(true))[0];
  const double target = std::log(std::sqrt(proof * b));
  size_t lost = 0;
  for (size_t j = 1; j < s.terms.size(); ++j)
    if (std::fabs(std::log(std::fabs(s.terms[j])) - target) < std::fabs(std::log(std::fabs(s.terms[lost])) - target))
      lost = j;
  Sim dropped = s;  // a per_add impl that loses that one update, in a random order
  dropped.terms.erase(dropped.terms.begin() + static_cast<std::ptrdiff_t>(lost));
  const double err = std::fabs(dropped.per_add(g) - x);
  EXPECT_LE(err, allowed(DType::fp32, proof, x)) << "the proof admits it";
  EXPECT_GT(err, allowed(DType::fp32, b, x)) << "the probabilistic bound catches it";
}

TEST(IndexingBound, Bf16CounterStallsInsidePerAddButNotOnce) {
  const Sim ones{DType::bf16, 0, std::vector<double>(1000, 1.0)};
  std::mt19937 g(1);
  const double stalled = ones.per_add(g);
  EXPECT_EQ(stalled, 256);  // 256 + 1 rounds back to 256 (ties to even)
  const auto b = indexing::bounds(ones.sums());
  EXPECT_LE(1000 - stalled, allowed(DType::bf16, b[0], 1000));
  EXPECT_EQ(b[2], 0);  // fp32 counts 1000 exactly and 1000 is a bf16 value: bit-exact
  EXPECT_GT(1000 - stalled, allowed(DType::bf16, b[2], 1000));
  // Past 2^24 fp32 adds the bounds stay finite (θ, not γ, whose n·u >= 1 would make it negative).
  const Sim many{DType::fp32, 0, std::vector<double>((1 << 24) + 5, 1.0)};
  for (double e : indexing::bounds(many.sums())) EXPECT_TRUE(std::isfinite(e) && e > 0);
}

// The stall floor (families/indexing/bound.cpp): a bf16 counter of ones has its stall point, 256, as its
// floor under per_add (grouped: 128, two roundings per group); the counter gets there and no
// lower, and a counter that lost its duplicates (1) is far below it. Before the floor, per_add
// allowed anything in [0, 2·3000].
TEST(IndexingFloor, Bf16CounterOfOnesHasItsStallPointAsFloor) {
  const Sim ones{DType::bf16, 0, std::vector<double>(3000, 1.0)};
  std::mt19937 g(3);
  const auto b = indexing::model_bounds(ones.sums());
  const auto per_add = b[static_cast<size_t>(Accumulation::per_add)],
             grouped = b[static_cast<size_t>(Accumulation::grouped)];
  EXPECT_EQ(per_add.below, 3000 - 256);
  EXPECT_EQ(grouped.below, 3000 - 128);
  EXPECT_EQ(per_add.above, indexing::bounds(ones.sums())[0]);  // the side away from zero keeps E
  EXPECT_GE(per_add.above, 2999);
  EXPECT_EQ(ones.per_add(g), 256);
  EXPECT_LT(1.0, 3000 - per_add.below - spacing_at(DType::bf16, 3000 + per_add.above) / 2);
  // All-negative terms: the floor is on the other side.
  const Sim minus{DType::bf16, 0, std::vector<double>(3000, -1.0)};
  const auto m = indexing::model_bounds(minus.sums())[0];
  EXPECT_EQ(m.above, 3000 - 256);
  EXPECT_EQ(m.below, per_add.above);
  // Mixed signs (the normal fill): no floor.
  const Sim mixed{DType::bf16, 0, {1, -1, 1, 1, 1}};
  for (const auto& e : indexing::model_bounds(mixed.sums())) EXPECT_EQ(e.below, e.above);
}

// Every model's arithmetic on one-signed terms (positive and unit terms, self >= 0) stays inside
// [x − below, x + above] plus the output's rounding, in random orders and groupings, in every
// float dtype and from 2 to 5000 adds; the floor is far above zero where counters stall.
TEST(IndexingFloor, CoversEveryModelsArithmeticOnOneSignedTerms) {
  std::mt19937 g(31);
  std::uniform_real_distribution<double> ud(0, 1);
  for (DType d : {DType::bf16, DType::fp16, DType::fp32})
    for (int n : {2, 7, 64, 1000, 5000})
      for (bool ones : {false, true}) {
        Sim s{d, ones ? 0.0 : rn(d, ud(g)), {}};
        for (int i = 0; i < n; ++i) s.terms.push_back(ones ? 1.0 : rn(d, ud(g) + 1e-3));
        std::vector<int64_t> pos(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int64_t>(i) * 2;  // warps of 16 terms
        indexing::ElementSums e = s.sums();
        e.positions = pos.data();
        const auto b = indexing::model_bounds(e);
        const double x = s.exact();
        auto inside = [&](double got, const indexing::ModelBound& m) {
          const double r = spacing_at(d, x + std::max(m.above, m.below)) / 2;
          return got >= x - m.below - r && got <= x + m.above + r;
        };
        SCOPED_TRACE(std::string(name(d)) + " n " + std::to_string(n) + (ones ? " ones" : " positive"));
        for (int trial = 0; trial < (n >= 1000 ? 8 : 40); ++trial) {
          EXPECT_TRUE(inside(s.per_add(g), b[static_cast<size_t>(Accumulation::per_add)]));
          EXPECT_TRUE(inside(s.grouped(g), b[static_cast<size_t>(Accumulation::grouped)]));
          EXPECT_TRUE(inside(s.warp32(g, pos), b[static_cast<size_t>(Accumulation::warp32)]));
        }
        if (d == DType::bf16 && n == 5000)  // stalled near 256 (ones) or 128–256 (positive): a floor above 64
          EXPECT_LT(b[static_cast<size_t>(Accumulation::per_add)].below, x - 64);
      }
}

TEST(IndexingBound, CatchesADroppedTermAtLowContention) {
  // Every model's bound, the loosest (grouped, what undeclared impls and cuda.warp_aggregated
  // get) included: each must be able to fail on a dropped duplicate.
  for (int model = 0; model < 3; ++model) {
    std::mt19937 g(5);
    int caught = 0;
    for (int trial = 0; trial < 50; ++trial) {
      const Sim s = random_sim(DType::bf16, 4, g, false);
      const auto b = indexing::bounds(s.sums());
      const double dropped = s.exact() - s.terms[0];  // what an impl that drops a duplicate returns
      caught += std::fabs(dropped - s.exact()) > allowed(DType::bf16, b[model], s.exact());
    }
    EXPECT_GT(caught, 40) << "model " << model;  // the bounds are a few ulps of bf16 here; a term is ~1
  }
}

TEST(IndexingBound, ExactWhenEveryPartialSumIsRepresentable) {
  const Sim ints{DType::bf16, 3, {1, -2, 4, 8, 16, -32}};
  for (double e : indexing::bounds(ints.sums())) EXPECT_EQ(e, 0);
  const Sim wide{DType::bf16, 0, {256, 1}};  // 257 needs 9 bits: not exact per add
  const auto b = indexing::bounds(wide.sums());
  EXPECT_GT(b[0], 0);
  EXPECT_EQ(b[2], 1);  // exact in fp32, then RN_bf16(257) = 256: that one rounding
}

// ---- host.omp, negative cases, planted impls -----------------------------------------------------

struct FamilyCase {
  Op op;
  const char* file;
  const char* impl;
};
const FamilyCase kFamilies[] = {{Op::scatter_add, "scatter_add.yaml", "host.omp"},
                                {Op::index_add, "index_add.yaml", "host.omp_rows"},
                                {Op::index_select, "index_select.yaml", "host.gather"}};

TEST(IndexingHost, PassesTheSmokeTierUnderItsDeclaredModel) {
  for (const auto& fc : kFamilies) {
    const Impl* impl = builtin_registry().impl(fc.impl);
    int n = 0;
    for (const auto& e : catalog(fc.file)) {
      if (e.tier != Tier::smoke || !family(fc.op).expected_error(*e.problem).empty()) continue;
      EXPECT_EQ(run_mismatches(*impl, e.problem->as<Problem>(), Accumulation::once), 0)
          << fc.impl << " " << e.problem_id;
      ++n;
    }
    EXPECT_GE(n, 40) << fc.impl;
  }
}

// The emulations of the CUDA kernels' arithmetic pass the smoke tier under the models the CUDA
// rows declare: the per-add bounds, their stall floors and the conservation check admit them.
TEST(IndexingHost, KernelEmulationsPassTheSmokeTierUnderTheCudaRowsModels) {
  const struct {
    Op op;
    const char* file;
    const char* impl;
    Accumulation model;
  } runs[] = {{Op::scatter_add, "scatter_add.yaml", "host.atomic", Accumulation::per_add},
              {Op::scatter_add, "scatter_add.yaml", "host.warp_aggregated", Accumulation::warp32},
              {Op::scatter_add, "scatter_add.yaml", "host.warp_aggregated", Accumulation::grouped},
              {Op::index_add, "index_add.yaml", "host.atomic_rows", Accumulation::per_add},
              {Op::index_add, "index_add.yaml", "host.warp_aggregated_rows", Accumulation::warp32}};
  for (const auto& r : runs) {
    const Impl* impl = builtin_registry().impl(r.impl);
    ASSERT_TRUE(impl) << r.impl;
    int n = 0;
    for (const auto& e : catalog(r.file)) {
      if (e.tier != Tier::smoke || !family(r.op).expected_error(*e.problem).empty()) continue;
      EXPECT_EQ(run_mismatches(*impl, e.problem->as<Problem>(), r.model), 0) << r.impl << " " << e.problem_id;
      ++n;
    }
    EXPECT_GE(n, 40) << r.impl;
  }
}

TEST(IndexingHost, RefusesEveryNegativeCase) {
  for (const auto& fc : kFamilies)
    testutil::expect_negative_cases_refused(family(fc.op), *builtin_registry().impl(fc.impl), catalog(fc.file), 3);
}

TEST(IndexingHost, DeclaredModelsOfTheToleranceTable) {
  const ToleranceTable t = ToleranceTable::load((testutil::cases_dir() / "tolerances.yaml").string());
  auto model = [&](const char* fam, const char* impl, DType d) {
    return t.resolve(fam, "out", d, impl, "sm90", "", nullptr);
  };
  EXPECT_EQ(model("scatter_add", "cuda.atomic", DType::bf16).accumulation, "per_add");
  EXPECT_EQ(model("index_add", "cuda.atomic_rows", DType::fp16).accumulation, "per_add");
  EXPECT_EQ(model("scatter_add", "cuda.warp_aggregated", DType::fp32).accumulation, "warp32");
  EXPECT_EQ(model("index_add", "cuda.warp_aggregated_rows", DType::bf16).accumulation, "warp32");
  EXPECT_EQ(model("scatter_add", "hip.warp_aggregated", DType::bf16).accumulation, "grouped");  // 64-lane waves
  EXPECT_EQ(model("scatter_add", "cuda.sorted_dtype_acc", DType::bf16).accumulation, "once");
  EXPECT_EQ(model("scatter_add", "host.omp", DType::fp64).accumulation, "once");
  EXPECT_EQ(model("scatter_add", "host.atomic_drop_dups", DType::bf16).accumulation, "per_add");
  EXPECT_EQ(model("index_add", "host.atomic_rows", DType::fp16).accumulation, "per_add");
  EXPECT_EQ(model("scatter_add", "host.warp_aggregated", DType::bf16).accumulation, "warp32");
  EXPECT_EQ(model("index_add", "host.warp_aggregated_rows_drop_dups", DType::bf16).accumulation, "warp32");
  EXPECT_EQ(model("index_add", "host.grouped_rows_drop_dups", DType::bf16).accumulation, "grouped");
  EXPECT_EQ(model("index_add", "host.omp_rows_dtype_acc", DType::bf16).accumulation, "once");
  EXPECT_EQ(model("scatter_add", "aten.plugin_impl", DType::fp32).accumulation, "grouped");  // undeclared
  EXPECT_EQ(model("index_add", "cuda.sorted_rows", DType::int64).metric, Metric::exact);
  EXPECT_EQ(model("index_select", "cuda.gather", DType::bf16).metric, Metric::bitexact);
}

// Every planted host impl fails (under the model its tolerance rule declares) on every smoke and
// default problem it takes; the unstable one only under --bitwise, so it is run twice.
TEST(IndexingPlanted, HostPlantsFailWhereTheyRun) {
  const struct {
    const char* file;
    const char* name;
    Accumulation model;
  } plants[] = {{"scatter_add.yaml", "host.omp_drop_dups", Accumulation::once},
                {"scatter_add.yaml", "host.omp_dtype_acc", Accumulation::once},
                {"scatter_add.yaml", "host.omp_unstable", Accumulation::once},
                {"scatter_add.yaml", "host.atomic_drop_dups", Accumulation::per_add},
                {"scatter_add.yaml", "host.warp_aggregated_drop_dups", Accumulation::warp32},
                {"scatter_add.yaml", "host.grouped_drop_dups", Accumulation::grouped},
                {"scatter_add.yaml", "host.atomic_vec4_tail", Accumulation::per_add},
                {"index_add.yaml", "host.omp_rows_drop_dups", Accumulation::once},
                {"index_add.yaml", "host.omp_rows_dtype_acc", Accumulation::once},
                {"index_add.yaml", "host.atomic_rows_drop_dups", Accumulation::per_add},
                {"index_add.yaml", "host.warp_aggregated_rows_drop_dups", Accumulation::warp32},
                {"index_add.yaml", "host.grouped_rows_drop_dups", Accumulation::grouped}};
  for (const auto& plant : plants) {
    const char* name = plant.name;
    const Impl* impl = builtin_registry().impl(name);
    ASSERT_TRUE(impl && impl->planted()) << name;
    int n = 0;
    for (const auto& e : catalog(plant.file)) {
      if (e.tier == Tier::full || !impl->supports(*e.problem, testutil::host_arch()).ok) continue;
      const Problem& p = e.problem->as<Problem>();
      if (p.src_numel() > 200000) continue;  // quick on 2 cores: the large shapes repeat the small ones' bug
      const Family& f = family(p.op);
      const TensorMap in = f.make_inputs(p, case_seed(f, p));
      const TensorMap a = impl->run(p, in, RunContext{&testutil::host_arch(), -1});
      if (std::string(name) == "host.omp_unstable") {
        const TensorMap b = impl->run(p, in, RunContext{&testutil::host_arch(), -1});
        EXPECT_NE(fingerprint(a.at("out")), fingerprint(b.at("out"))) << name << " " << e.problem_id;
      } else {
        EXPECT_GT(mismatches(p, f.reference(p, in), a.at("out"), plant.model), 0) << name << " " << e.problem_id;
      }
      ++n;
    }
    EXPECT_GE(n, 3) << name;
  }
}

// Without --bitwise the unstable plants (host and CUDA) cannot show their bug: their cases SKIP
// rather than pass as XPASS; with it they run.
TEST(IndexingPlanted, UnstablePlantsRunOnlyUnderBitwise) {
  for (const bool bitwise : {false, true}) {
    SuiteOptions o{testutil::cases_dir().string(), {}, "host", ""};
    o.include_planted = true;
    o.bitwise = bitwise;
    const Suite suite(builtin_registry(), o);
    int unstable = 0, runs = 0;
    for (const Case& c : suite.all_cases()) {
      if (c.id.rfind("scatter_add.host_omp_unstable/", 0) != 0) continue;
      const auto why = suite.skip_reason(c);
      const bool for_bitwise = why && why->find("--bitwise") != std::string::npos;
      EXPECT_FALSE(bitwise && for_bitwise) << c.id;
      unstable += for_bitwise;
      runs += !why.has_value();
    }
    EXPECT_EQ(unstable > 0, !bitwise);
    EXPECT_EQ(runs > 0, bitwise);
  }
}

TEST(IndexingPlanted, CannotShowSaysWhy) {
  using indexing::PlantedBug;
  const Problem last{.dtype = DType::bf16, .n = 33, .m = 64, .dist = Dist::all_last};
  EXPECT_EQ(indexing::planted_bug_cannot_show(last, PlantedBug::pair_past_end), "");  // element 32 starts a pair
  Problem even = last;
  even.n = 32;
  EXPECT_NE(indexing::planted_bug_cannot_show(even, PlantedBug::pair_past_end), "");
  even.misalign = true;  // element 31 at a 2-mod-4 base + 62: the pair starts there
  EXPECT_EQ(indexing::planted_bug_cannot_show(even, PlantedBug::pair_past_end), "");
  const Problem first{.dtype = DType::fp16, .n = 8, .m = 4, .dist = Dist::all_first, .misalign = true};
  EXPECT_EQ(indexing::planted_bug_cannot_show(first, PlantedBug::pair_past_end), "");  // the pair before element 0
  const Problem big{
      .op = Op::index_select, .dtype = DType::bf16, .n = 1048640, .m = 256, .inner = 4096, .dist = Dist::strided};
  EXPECT_EQ(indexing::planted_bug_cannot_show(big, PlantedBug::index32), "");
  Problem small = big;
  small.n = 524416;
  EXPECT_NE(indexing::planted_bug_cannot_show(small, PlantedBug::index32), "");
  const Problem neg{.n = 37, .m = 301, .bad_index = BadIndex::negative, .expect_error = "index"};
  EXPECT_NE(indexing::planted_bug_cannot_show(neg, PlantedBug::drop_duplicates), "");
  // A lost duplicate is excluded only where nothing is dropped or where a derived probability
  // says the judged model's bound may cover it: never for a 16-bit destination as such.
  const auto drop = [](const char* id, Accumulation a) {
    return indexing::planted_bug_cannot_show(indexing::fields(Op::scatter_add).parse_id(id),
                                             PlantedBug::drop_duplicates, a);
  };
  EXPECT_EQ(drop("bf16_i64_n3_m3000_alllast_ones", Accumulation::per_add), "");
  EXPECT_EQ(drop("bf16_i64_n3_m5000_uniform_positive", Accumulation::grouped), "");
  EXPECT_EQ(drop("bf16_i64_n4096_m4096_h3072_uniform", Accumulation::warp32), "");  // m = n: the birthday bound
  EXPECT_EQ(drop("fp16_i64_n100_m1305301_uniform", Accumulation::per_add), "");
  EXPECT_EQ(drop("bf16_i64_n100_m1305301_uniform", Accumulation::once), "");
  EXPECT_NE(drop("bf16_i64_n100_m1305301_uniform", Accumulation::per_add).find("probability 1 "), std::string::npos);
  EXPECT_NE(drop("bf16_i64_n1_m1_uniform", Accumulation::per_add).find("no index surely repeats"), std::string::npos);
  Problem strided{.dtype = DType::bf16, .n = 64, .m = 64, .dist = Dist::strided};
  EXPECT_NE(indexing::planted_bug_cannot_show(strided, PlantedBug::drop_duplicates), "");  // every index distinct
  strided.m = 65;
  EXPECT_EQ(indexing::planted_bug_cannot_show(strided, PlantedBug::drop_duplicates), "");
  // The vec4 tail loses terms only at a count of 2 or 3 (mod 4), and is run only where one lost
  // term surely shows: exact sums, counters of ones below the dtype's stall, and random-sign
  // terms whose per-add bound (9.3·u·k·σ at k adds) covers one with probability at most 1%.
  const auto tail = [](const char* id) {
    return indexing::planted_bug_cannot_show(indexing::fields(Op::scatter_add).parse_id(id), PlantedBug::vec4_tail,
                                             Accumulation::per_add);
  };
  EXPECT_EQ(tail("fp32_i64_n33_m447_h5_allfirst"), "");  // 2,235 terms: 3 (mod 4)
  EXPECT_EQ(tail("int32_i32_n11_m43_allfirst"), "");
  EXPECT_NE(tail("fp32_i64_n37_m301_uniform").find("one-term tail"), std::string::npos);  // 1 (mod 4)
  EXPECT_NE(tail("fp32_i64_n17_m40_h5_uniform").find("one-term tail"), std::string::npos);
  EXPECT_NE(tail("bf16_i64_n1_m2_allfirst").find("probability 0.058"), std::string::npos);  // erf(9.3·2^-8·2/√2)
  EXPECT_EQ(tail("fp16_i64_n1_m2_allfirst"), "");  // erf(9.3·2^-11·2/√2) = 0.0072
  EXPECT_NE(tail("fp16_i64_n1_m6_allfirst").find("random-sign terms"), std::string::npos);
  EXPECT_EQ(tail("bf16_i64_n3_m254_alllast_ones"), "");
  EXPECT_NE(tail("bf16_i64_n3_m258_alllast_ones").find("stalls"), std::string::npos);
  EXPECT_NE(tail("fp32_i64_n3_m258_alllast_positive").find("one-signed"), std::string::npos);
}

// The warp kernels' lost update drops a group of 32 positions' sum, so it shows only where a
// destination takes terms from two groups. Seeded samples found plants passing where every
// term of a column fell in one group (scatter_add b2 n5 m3 all_first: 6 terms; index_add b3
// n1066 m32 all_first: each column's 32 terms in one aligned group). Where the rule says
// "cannot show", the host plant's output equals host.warp_aggregated's bit for bit; where it
// says nothing, the plant fails under its model.
TEST(IndexingPlanted, ALostWarpGroupShowsOnlyWhereADestinationSpansTwoGroups) {
  using indexing::PlantedBug;
  const Registry& reg = builtin_registry();
  struct Want {
    Op op;
    const char* id;
    bool shows;
  };
  for (const Want& w : std::vector<Want>{{Op::scatter_add, "int64_i64_b2_n5_m3_allfirst", false},
                                         {Op::index_add, "int32_i32_b3_n1066_m32_allfirst", false},
                                         {Op::index_add, "int32_i32_b3_n1066_m33_allfirst", true},
                                         {Op::index_add, "int32_i64_b3_n229_m2_h5_alllast", false},
                                         {Op::scatter_add, "int32_i64_n37_m301_sorted", true},
                                         {Op::index_add, "int32_i64_b2_n29_m61_h7_sorted", true},
                                         {Op::scatter_add, "int64_i64_n549_m908_strided", true},
                                         // not sure by the distribution: the seeded index decides
                                         {Op::scatter_add, "bf16_i32_b2_n22_m41_uniform", true},
                                         {Op::scatter_add, "int64_i64_n549_m40_strided", false}}) {
    const Problem p = indexing::fields(w.op).parse_id(w.id);
    for (const Accumulation a : {Accumulation::warp32, Accumulation::grouped}) {
      const std::string why = indexing::planted_bug_cannot_show(p, PlantedBug::drop_duplicates, a);
      EXPECT_EQ(why.empty(), w.shows) << w.id << ": " << why;
    }
    // One term a group under per_add: any repeat shows (strided m <= n repeats none).
    const bool repeats = p.dist != Dist::strided || p.m > p.n;
    EXPECT_EQ(indexing::planted_bug_cannot_show(p, PlantedBug::drop_duplicates, Accumulation::per_add).empty(), repeats)
        << w.id;
    const bool rows = w.op == Op::index_add;
    const Impl* plant = reg.impl(rows ? "host.warp_aggregated_rows_drop_dups" : "host.warp_aggregated_drop_dups");
    const Impl* right = reg.impl(rows ? "host.warp_aggregated_rows" : "host.warp_aggregated");
    ASSERT_TRUE(plant && right);
    const Family& f = family(w.op);
    const TensorMap in = f.make_inputs(p, case_seed(f, p));
    const RunContext ctx{&testutil::host_arch(), -1};
    const HostTensor got = plant->run(p, in, ctx).at("out"), want = right->run(p, in, ctx).at("out");
    EXPECT_EQ(got.to_f64() != want.to_f64(), w.shows) << w.id << ": the plant's output against the kernel's";
  }
}

}  // namespace
}  // namespace opcts
