// The grouped_mm family: ids, the reference against a naive loop, host.grouped within its bound on the
// smoke tier, untouched rows past the last offset, negative cases refused, and each planted bug failing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "judge/compare.hpp"
#include "numerics/dtype.hpp"
#include "runner/catalog.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using grouped_mm::Mode;
using grouped_mm::Problem;
using grouped_mm::Recipe;

const Family& family() { return *builtin_registry().family("grouped_mm"); }
const Impl& impl(const char* name) { return *builtin_registry().impl(name); }

std::vector<CatalogEntry> catalog() {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / "grouped_mm.yaml").string()});
}

std::vector<CatalogEntry> smoke() {
  std::vector<CatalogEntry> s;
  for (auto& e : catalog())
    if (e.tier == Tier::smoke) s.push_back(e);
  return s;
}

// "out" of `got` judged against the reference under the tolerance rule's model (IEEE fp32,
// false alarm 1e-12).
OutputStats judged(const TensorMap& got, const References& ref) {
  std::vector<WorstElement> worst;
  Tolerance t;
  t.metric = Metric::bounded;
  t.factor = 1;
  t.false_alarm = 1e-12;
  return compare_output("out", got.at("out"), {.want = ref.exact.at("out"), .reduction = &ref.reduction.at("out")}, t,
                        worst);
}

// Mismatches of the impl's "out" (judged); a write outside the output (ContractBreach) counts as one.
int64_t mismatches(const Impl& im, const Problem& p) {
  const TensorMap in = family().make_inputs(p, case_seed(family(), p));
  const References ref = family().reference(p, in);
  TensorMap got;
  try {
    got = im.run(p, in, RunContext{&testutil::host_arch(), -1});
  } catch (const ContractBreach&) {
    return 1;
  }
  const OutputStats s = judged(got, ref);
  return s.mismatches + (s.biased() ? 1 : 0);
}

TEST(GroupedMmId, SpellsSplitsTailsAndDefects) {
  const Problem p{.mode = Mode::m2d_3d,
                  .recipe = Recipe::bf16,
                  .groups = 6,
                  .m = 3268,
                  .n = 64,
                  .k = 128,
                  .split = grouped_mm::Split::sizes,
                  .sizes = {162, 0, 2577, 446, 0, 83},
                  .tail = 13};
  const std::string id = grouped_mm::fields().id(p);
  EXPECT_EQ(id, "2d_3d_bf16_g6_m3268_n64_k128_s162x0x2577x446x0x83_tail13");
  EXPECT_EQ(grouped_mm::fields().parse_id(id), p);
  EXPECT_EQ(grouped_mm::fields().id(Problem{.mode = Mode::m2d_2d,
                                            .recipe = Recipe::mxfp8,
                                            .groups = 8,
                                            .m = 64,
                                            .n = 64,
                                            .k = 256,
                                            .split = grouped_mm::Split::single}),
            "2d_2d_mxfp8_g8_m64_n64_k256_single");
  for (const auto& e : catalog()) EXPECT_EQ(family().problem_id(*family().parse_id(e.problem_id)), e.problem_id);
}

TEST(GroupedMmId, ValidationNamesTheRule) {
  testutil::expect_invalid([](const std::string& id) { grouped_mm::fields().parse_id(id); },
                           {
                               {"2d_3d_bf16_g2_m10_n8_k8_s4x5", "sum to 9"},
                               {"2d_2d_rowwise_g2_m8_n16_k32_s8x24", "expect_error: offs"},
                               {"2d_3d_mxfp8_g2_m48_n16_k32", "explicit sizes"},
                               {"3d_3d_rowwise_g2_m8_n16_k24", "expect_error: K"},
                               {"3d_3d_bf16_g2_m8_n16_k24_tail8", "3d_3d has no offsets"},
                           });
}

TEST(GroupedMmSizes, SkewedSplitsAreAlignedAndSkewed) {
  const Problem p{.mode = Mode::m2d_3d,
                  .recipe = Recipe::mxfp8,
                  .groups = 256,
                  .m = 8192,
                  .n = 32,
                  .k = 32,
                  .split = grouped_mm::Split::skewed};
  const std::vector<int64_t> s = grouped_mm::group_sizes(p);
  int64_t sum = 0, most = 0;
  for (int64_t v : s) {
    EXPECT_EQ(v % 32, 0);
    sum += v;
    most = std::max(most, v);
  }
  EXPECT_EQ(sum, 8192);
  EXPECT_GE(most, 3 * 8192 / 256);  // the busiest expert takes several times the mean
}

// The dequantized operands of one output element from the inputs, by the definition, with this
// test's own reading of offsets and scale layouts: deq(a) and deq(b) at absolute K index k.
struct NaiveOperands {
  std::function<double(int64_t)> a, b;
};
NaiveOperands naive_operands(const Problem& p, const TensorMap& in, int64_t g, int64_t i, int64_t j) {
  const HostTensor &a = in.at("a"), &b = in.at("b");
  // Global rows of A and of Bᵀ for output (i, j) of group g: i, j within the group's block.
  const int64_t ra = p.mode == Mode::m2d_3d ? i : p.mode == Mode::m2d_2d ? i : g * p.m + i;
  const int64_t rb = p.mode == Mode::m3d_2d ? j : p.mode == Mode::m2d_2d ? j : g * p.n + j;
  const int64_t lda = a.shape().back(), ldb = b.shape().back();
  const bool rowwise = p.recipe == Recipe::rowwise;
  const double sa = rowwise ? in.at("a_scale").get(p.mode == Mode::m2d_3d ? ra : g * p.m + (ra % p.m)) : 1.0;
  const double sb = rowwise ? in.at("b_scale").get(p.mode == Mode::m3d_2d ? rb : g * p.n + (rb % p.n)) : 1.0;
  return {[&a, ra, lda, sa](int64_t k) { return a.get(ra * lda + k) * sa; },
          [&b, rb, ldb, sb](int64_t k) { return b.get(rb * ldb + k) * sb; }};
}

// x of one output element: Σ_k deq(a)·deq(b) over the group (a naive loop, no GEMM).
double naive(const Problem& p, const TensorMap& in, int64_t g, int64_t i, int64_t j, int64_t k0, int64_t depth) {
  const NaiveOperands o = naive_operands(p, in, g, i, j);
  double x = 0;
  for (int64_t k = k0; k < k0 + depth; ++k) x += o.a(k) * o.b(k);
  return x;
}

TEST(GroupedMmReference, MatchesANaiveLoopAndLeavesTheTailNaN) {
  // Every mode, bf16 and rowwise (naive reads the rowwise scales on its own); jagged sizes with an
  // empty group and a tail. reference_element, the benchmark's entry point, agrees element by
  // element, and reduction_shape states what reference() does.
  for (Mode mode : {Mode::m2d_3d, Mode::m3d_3d, Mode::m2d_2d, Mode::m3d_2d})
    for (Recipe r : {Recipe::bf16, Recipe::rowwise}) {
      Problem p{.mode = mode, .recipe = r, .groups = 3, .m = 24, .n = 32, .k = 48};
      if (mode != Mode::m3d_3d) {
        p.split = grouped_mm::Split::sizes;
        const int64_t total = mode == Mode::m2d_3d ? 40 : mode == Mode::m2d_2d ? 64 : 48;
        p.sizes = mode == Mode::m2d_2d ? std::vector<int64_t>{32, 0, 32} : std::vector<int64_t>{total - 8, 0, 8};
        (mode == Mode::m2d_3d ? p.m : mode == Mode::m2d_2d ? p.k : p.n) = total;
        p.tail = 16;
      }
      p.validate();
      const TensorMap in = family().make_inputs(p, 7);
      const References ref = family().reference(p, in);
      const std::vector<double>& want = ref.exact.at("out");
      const std::vector<int64_t> ends = grouped_mm::group_ends(p);
      int64_t checked = 0, nan = 0;
      for (int64_t g = 0; g < p.groups; ++g) {
        const int64_t start = mode == Mode::m3d_3d || g == 0 ? 0 : ends[static_cast<size_t>(g - 1)];
        const int64_t end = mode == Mode::m3d_3d ? 0 : ends[static_cast<size_t>(g)];
        const int64_t rows = mode == Mode::m2d_3d ? end - start : p.m, cols = mode == Mode::m3d_2d ? end - start : p.n;
        const int64_t k0 = mode == Mode::m2d_2d ? start : 0, depth = mode == Mode::m2d_2d ? end - start : p.k;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t gi = mode == Mode::m2d_3d ? start + i : i, gj = mode == Mode::m3d_2d ? start + j : j;
            const int64_t at = mode == Mode::m2d_3d   ? gi * p.n + gj
                               : mode == Mode::m3d_2d ? gi * (p.n + p.tail) + gj
                                                      : (g * p.m + i) * p.n + j;
            const double x = naive(p, in, g, gi, gj, k0, depth);  // unrounded; fp64 sums in another order
            EXPECT_NEAR(want[static_cast<size_t>(at)], x, 1e-12 * (1 + std::fabs(x)))
                << grouped_mm::fields().id(p) << " at " << at;
            // The one-element entry point (the benchmark's) gives the same value and statistics.
            const NaiveOperands o = naive_operands(p, in, g, gi, gj);
            const grouped_mm::ElementReference e = grouped_mm::reference_element(
                depth, [&](int64_t k) { return o.a(k0 + k); }, [&](int64_t k) { return o.b(k0 + k); });
            const ReductionStats& st = ref.reduction.at("out");
            const auto near = [](double got, double due) {
              return std::fabs(got - due) <= 1e-12 * (1 + std::fabs(due));
            };
            EXPECT_TRUE(near(e.want, want[static_cast<size_t>(at)])) << at;
            EXPECT_TRUE(near(e.abs_sum, st.abs_sum[static_cast<size_t>(at)])) << at;
            EXPECT_TRUE(near(e.sq_sum, st.sq_sum[static_cast<size_t>(at)])) << at;
            EXPECT_TRUE(near(e.magnitude, st.magnitude[static_cast<size_t>(at)])) << at;
            ++checked;
          }
      }
      const ReductionStats shape = grouped_mm::reduction_shape(p), &st = ref.reduction.at("out");
      EXPECT_EQ(shape.terms, st.terms);
      EXPECT_EQ(shape.ragged, st.ragged);
      EXPECT_EQ(shape.zero_mean, st.zero_mean);
      EXPECT_EQ(shape.term_bits, st.term_bits);
      for (double w : want) nan += std::isnan(w);
      const int64_t tail = mode == Mode::m2d_3d ? p.tail * p.n : mode == Mode::m3d_2d ? p.tail * p.m : 0;
      EXPECT_EQ(nan, tail) << grouped_mm::fields().id(p);
      EXPECT_EQ(checked + nan, static_cast<int64_t>(want.size())) << grouped_mm::fields().id(p);
    }
}

TEST(GroupedMmReference, MxScalesChangeTheResultPerBlock) {
  // Doubling one e8m0 scale (code + 1) changes exactly the outputs whose group and row use it.
  const Problem p{.mode = Mode::m2d_2d, .recipe = Recipe::mxfp8, .groups = 2, .m = 8, .n = 16, .k = 64};
  TensorMap in = family().make_inputs(p, 3);
  const std::vector<double> before = family().reference(p, in).exact.at("out");
  const grouped_mm::MxLayout la = grouped_mm::mx_layout(p, 'a');
  HostTensor& s = in.at("a_scale");
  const int64_t at = la.index(1, 5, 0);  // group 1, row 5, its one K block
  s.set_code(at, s.code(at) + 1);
  const std::vector<double> after = family().reference(p, in).exact.at("out");
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        const size_t e = static_cast<size_t>((g * 8 + i) * 16 + j);
        if (g == 1 && i == 5) EXPECT_NE(after[e], before[e]);
        else EXPECT_EQ(after[e], before[e]);
      }
}

TEST(GroupedMmFnuz, IsRowwisesCodesAsE4m3fnuzWithDoubledScalesAndTheSameReference) {
  // rowwise_fnuz (families/grouped_mm/grouped_mm.hpp): the same code bytes read as e4m3fnuz (half the
  // value: bias 8 against 7), every scale exactly doubled, so the exact reference is rowwise's.
  for (const Mode mode : {Mode::m2d_3d, Mode::m3d_3d, Mode::m2d_2d, Mode::m3d_2d}) {
    Problem p{.mode = mode, .recipe = Recipe::rowwise, .groups = 3, .m = 48, .n = 32, .k = 64};
    Problem q = p;
    q.recipe = Recipe::rowwise_fnuz;
    const TensorMap a = family().make_inputs(p, 5), b = family().make_inputs(q, 5);
    for (const char* t : {"a", "b"}) {
      ASSERT_EQ(b.at(t).dtype(), DType::e4m3fnuz) << t;
      for (int64_t i = 0; i < a.at(t).numel(); ++i) {
        ASSERT_EQ(a.at(t).code(i), b.at(t).code(i)) << t << " " << i;
        ASSERT_EQ(2 * decode(DType::e4m3fnuz, b.at(t).code(i)), decode(DType::e4m3fn, a.at(t).code(i)))
            << t << " " << i;
      }
    }
    for (const char* t : {"a_scale", "b_scale"})
      for (int64_t i = 0; i < a.at(t).numel(); ++i) ASSERT_EQ(b.at(t).get(i), 2 * a.at(t).get(i)) << t << " " << i;
    const std::vector<double> want = family().reference(p, a).exact.at("out"),
                              got = family().reference(q, b).exact.at("out");
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (!std::isnan(want[i])) ASSERT_EQ(got[i], want[i]) << grouped_mm::to_string(mode) << " " << i;
  }
}

TEST(GroupedMmFnuz, AnImplDecodingTheCodesAsE4m3fnFails) {
  // The bound tells the formats apart: rowwise_fnuz inputs relabelled as e4m3fn (what an impl
  // that ignores the recipe's element type computes: 4× every product) fail against the
  // rowwise_fnuz reference; read as e4m3fnuz they pass.
  Problem q{.mode = Mode::m2d_3d, .recipe = Recipe::rowwise_fnuz, .groups = 4, .m = 128, .n = 32, .k = 64};
  EXPECT_EQ(mismatches(impl("host.grouped"), q), 0);
  const TensorMap in = family().make_inputs(q, case_seed(family(), q));
  const References ref = family().reference(q, in);
  Problem as_fn = q;
  as_fn.recipe = Recipe::rowwise;
  TensorMap relabelled = in;
  for (const char* t : {"a", "b"}) {
    HostTensor x(DType::e4m3fn, in.at(t).shape());
    for (int64_t i = 0; i < x.numel(); ++i) x.set_code(i, in.at(t).code(i));
    relabelled.at(t) = std::move(x);
  }
  const TensorMap got = impl("host.grouped").run(as_fn, relabelled, RunContext{&testutil::host_arch(), -1});
  EXPECT_GT(judged(got, ref).mismatches, 128 * 32 / 2);
}

TEST(GroupedMmHost, PassesTheSmokeTierWithinItsBound) {
  int n = 0;
  for (const auto& e : smoke()) {
    if (!family().expected_error(*e.problem).empty()) continue;
    EXPECT_EQ(mismatches(impl("host.grouped"), e.problem->as<Problem>()), 0) << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, 30);
}

TEST(GroupedMmHost, LeavesRowsPastTheLastOffsetAsThePoison) {
  // The host backend fills out with 0xFF bytes: untouched bf16 rows read back as 0xFFFF.
  const Problem p{.mode = Mode::m2d_3d, .recipe = Recipe::rowwise, .groups = 4, .m = 40, .n = 32, .k = 32, .tail = 8};
  const TensorMap in = family().make_inputs(p, 1);
  const TensorMap out = impl("host.grouped").run(p, in, RunContext{&testutil::host_arch(), -1});
  const HostTensor& o = out.at("out");
  for (int64_t i = 0; i < 48 * 32; ++i) {
    if (i >= 40 * 32) EXPECT_EQ(o.code(i), 0xFFFFu) << i;
    else EXPECT_NE(o.code(i), 0xFFFFu) << i;
  }
}

TEST(GroupedMmBound, CatchesEveryBScaleOffBy2ToTheMinus8) {
  // The bound can fail where it must: host.grouped run on B scales that are each 2^-8 too large
  // (an fp32 scale rounded to bf16 on the way in) fails against the true inputs' reference,
  // while the true scales pass.
  const Problem p{.mode = Mode::m2d_3d,
                  .recipe = Recipe::rowwise,
                  .groups = 4,
                  .m = 512,
                  .n = 64,
                  .k = 256,
                  .split = grouped_mm::Split::skewed};
  const TensorMap in = family().make_inputs(p, 11);
  const References ref = family().reference(p, in);
  auto run_on = [&](const TensorMap& given) {
    return judged(impl("host.grouped").run(p, given, RunContext{&testutil::host_arch(), -1}), ref);
  };
  const OutputStats ok = run_on(in);
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_FALSE(ok.biased());
  TensorMap off = in;
  HostTensor& bs = off.at("b_scale");
  for (int64_t i = 0; i < bs.numel(); ++i) bs.set(i, bs.get(i) * (1 + std::ldexp(1.0, -8)));
  const OutputStats bad = run_on(off);
  EXPECT_TRUE(bad.mismatches > 0 || bad.biased())
      << "slope " << bad.slope << " in [" << bad.slope_lo << ", " << bad.slope_hi << "]";
}

TEST(GroupedMmNegative, DefectsAreInTheTensors) {
  const Problem base{.mode = Mode::m2d_3d, .recipe = Recipe::rowwise, .groups = 4, .m = 128, .n = 32, .k = 64};
  auto with = [&](grouped_mm::Defect d, const char* arg) {
    Problem p = base;
    p.defect = d;
    p.expect_error = arg;
    p.validate();
    return family().make_inputs(p, 5);
  };
  const TensorMap ok = family().make_inputs(base, 5);
  const HostTensor dec = with(grouped_mm::Defect::offs_decreasing, "offs").at("offs");
  EXPECT_LT(dec.get(1), dec.get(0));
  EXPECT_GT(with(grouped_mm::Defect::offs_out_of_range, "offs").at("offs").get(3), 128);
  EXPECT_EQ(with(grouped_mm::Defect::offs_count, "offs").at("offs").numel(), 3);
  EXPECT_EQ(with(grouped_mm::Defect::a_scale_count, "scale_a").at("a_scale").numel(), ok.at("a_scale").numel() - 1);
  EXPECT_EQ(with(grouped_mm::Defect::b_scale_count, "scale_b").at("b_scale").numel(), ok.at("b_scale").numel() - 1);
}

TEST(GroupedMmNegative, HostRefusesEveryNegativeCase) {
  testutil::expect_negative_cases_refused(family(), impl("host.grouped"), catalog(), 12);
}

TEST(GroupedMmPlanted, EveryPlantedHostImplFailsWhereItIsProbed) {
  const auto entries = smoke();
  for (grouped_mm::PlantedBug b : grouped_mm::planted_bugs()) {
    const std::string name = "host.grouped_" + std::string(grouped_mm::to_string(b));
    const Impl& planted = impl(name.c_str());
    ASSERT_TRUE(planted.planted()) << name;
    int n = 0;
    for (const auto& e : entries) {
      if (!planted.supports(*e.problem, testutil::host_arch()).ok) continue;
      EXPECT_GT(mismatches(planted, e.problem->as<Problem>()), 0) << name << " passed " << e.problem_id;
      ++n;
    }
    EXPECT_GE(n, 3) << name;
  }
}

}  // namespace
}  // namespace opcts
