// The invariance contracts (`opcts run --invariance`; runner/invariance.hpp): the runner's
// sub-problems, the checks' failures naming the axis, the impls that hold their claims, the planted
// impls that break them, the problems it cannot cut, and the ABI's declaration.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include "core/abi_impl.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "families/sdpa/sdpa.hpp"
#include "gpu/host/host_impls.hpp"
#include "runner/invariance.hpp"

namespace opcts {

void register_sdpa_family(Registry& reg);
void register_scaled_mm_family(Registry& reg);

namespace {

const ArchInfo kHost{"host", "host"};

Registry& registry() {
  static Registry reg = [] {
    Registry r;
    register_sdpa_family(r);
    register_scaled_mm_family(r);
    register_host_sdpa(r);
    register_host_scaled_mm(r);
    return r;
  }();
  return reg;
}

// The case's outputs for `impl` on `p` (seeded inputs) with `tactic` and the checks' verdict on them.
InvarianceVerdict verdict(const Impl& impl, const Problem& p, std::string_view tactic = "", uint64_t seed = 11) {
  const Family& f = impl.family_def();
  const TensorMap in = f.make_inputs(p, seed);
  RunContext ctx;
  ctx.arch = &kHost;
  ctx.tactic = tactic;
  const TensorMap out = impl.run(p, in, ctx);
  return check_invariance(f, impl, kHost, p, tactic, in, out,
                          [&](const Problem& sub, const TensorMap& sub_in, std::string_view tactic) {
                            RunContext sub_ctx = ctx;
                            sub_ctx.tactic = tactic;
                            return impl.run(sub, sub_in, sub_ctx);
                          });
}

// A causal fp16 batch whose rows see up to 100 keys: more than one tile of either width.
sdpa::Problem dense_batch() {
  return {.dtype = DType::fp16,
          .batch = 3,
          .heads_q = 2,
          .heads_kv = 1,
          .seq_q = 40,
          .seq_k = 100,
          .head_dim = 32,
          .head_dim_v = 32,
          .mask = sdpa::Mask::causal_lower_right};
}

scaled_mm::Problem rowwise_rows(int64_t m) {
  return {.m = m, .n = 64, .k = 256, .recipe = scaled_mm::Recipe::rowwise, .out = DType::bf16};
}

// dense_batch's three entries as varlen sequences of these lengths (the largest its 40 and 100).
sdpa::Problem varlen_of(std::vector<int64_t> q, std::vector<int64_t> k) {
  sdpa::Problem p = dense_batch();
  p.layout = sdpa::Layout::varlen;
  p.seqlens_q = std::move(q);
  p.seqlens_k = std::move(k);
  return p;
}
// Three sequences of unequal lengths, the first of rows that see up to 100 keys.
sdpa::Problem varlen_batch() { return varlen_of({40, 7, 12}, {100, 9, 12}); }
// dense_batch packed: three sequences of its lengths.
sdpa::Problem varlen_equal() { return varlen_of({40, 40, 40}, {100, 100, 100}); }

TEST(Invariance, CopyRunsFillsTheSubProblemsLayoutByElement) {
  HostTensor t(DType::fp32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) t.set(i, static_cast<double>(i));
  // Rows of 4 elements' storage (a leading dimension of 4), as a strided operand's batch of one has.
  const HostTensor s = copy_runs(t, {{0, 4, 2, 2}, {2, 0, 2, 0}}, HostTensor(DType::fp32, {2, 2}, {4, 1}, 6));
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(s.get(0), 4);
  EXPECT_EQ(s.get(1), 5);
  EXPECT_EQ(s.get(2), 0);
  EXPECT_EQ(s.get(3), 1);
  EXPECT_THROW(copy_runs(t, {{0, 4, 4, 2}}, HostTensor(DType::fp32, {2, 2})), std::logic_error);
  EXPECT_THROW(copy_runs(t, {{0, 0, 1, 0}}, HostTensor(DType::fp16, {2, 2})), std::logic_error);
}

// The packing cut's runs land each element where the other layout keeps it: bhsd's (b, h, s, x)
// at the varlen row b·S + s, head h; lse's (b, h, s) at [h, b·S + s].
TEST(Invariance, ThePackingCutMovesEachElementToItsTokenRow) {
  sdpa::Problem p = dense_batch();
  const Family& f = registry().impl("host.flash")->family_def();
  const TensorMap in = f.make_inputs(p, 3);
  const InvarianceCut cut = f.invariance_cut(p, in, InvarianceAxis::packing);
  ASSERT_EQ(cut.why_not, "");
  const auto& twin = cut.problem->as<sdpa::Problem>();
  EXPECT_EQ(twin.layout, sdpa::Layout::varlen);
  EXPECT_EQ(twin.seqlens_k, (std::vector<int64_t>{100, 100, 100}));
  const HostTensor q = copy_runs(in.at("q"), cut.inputs.at("q"), HostTensor(in.at("q").dtype(), {120, 2, 32}));
  // bhsd q [3, 2, 40, 32]: entry 2, head 1, row 5, element 7.
  EXPECT_EQ(q.code(((2 * 40 + 5) * 2 + 1) * 32 + 7), in.at("q").code(((2 * 2 + 1) * 40 + 5) * 32 + 7));
  EXPECT_EQ(cut.inputs.count("cu_seqlens_q"), 0u);  // the twin's own
  HostTensor lse(DType::fp32, {3, 2, 40}), packed_lse(DType::fp32, {2, 120});
  for (int64_t i = 0; i < lse.numel(); ++i) lse.set(i, static_cast<double>(i));
  packed_lse = copy_runs(lse, cut.outputs.at("lse"), packed_lse);
  EXPECT_EQ(packed_lse.get(1 * 120 + 2 * 40 + 5), (2 * 2 + 1) * 40 + 5);
  // And back: the varlen batch of equal lengths given dense (bshd: the same element order).
  const sdpa::Problem v = varlen_equal();
  const InvarianceCut back = f.invariance_cut(v, f.make_inputs(v, 3), InvarianceAxis::packing);
  ASSERT_EQ(back.why_not, "");
  EXPECT_EQ(back.problem->as<sdpa::Problem>().layout, sdpa::Layout::bshd);
  ASSERT_EQ(back.inputs.at("q").size(), 3u);
  EXPECT_EQ(back.inputs.at("q")[1].from, back.inputs.at("q")[1].to);
}

TEST(Invariance, HostFlashHoldsEveryAxisOnADenseBatch) {
  for (const sdpa::Layout layout : {sdpa::Layout::bhsd, sdpa::Layout::bshd})
    for (const sdpa::Direction direction : {sdpa::Direction::forward, sdpa::Direction::backward}) {
      sdpa::Problem p = dense_batch();
      p.layout = layout, p.direction = direction;
      const InvarianceVerdict v = verdict(*registry().impl("host.flash"), p);
      EXPECT_EQ(v.failure, "");
      EXPECT_TRUE(v.not_checked.empty()) << v.not_checked.front();
    }
}

// A varlen batch is cut by its sequences (the first alone, the order reversed), padding rows and
// all; one of equal lengths is packed back into a dense batch.
TEST(Invariance, HostFlashHoldsEveryAxisOnAVarlenBatch) {
  const Impl& flash = *registry().impl("host.flash");
  for (const sdpa::Direction direction : {sdpa::Direction::forward, sdpa::Direction::backward}) {
    sdpa::Problem p = varlen_batch();
    p.direction = direction;
    p.pad_k = 3;
    InvarianceVerdict v = verdict(flash, p);
    EXPECT_EQ(v.failure, "");
    EXPECT_EQ(v.not_checked,
              std::vector<std::string>{"packing: sequences of unequal lengths: a dense batch would pad them"});
    p = varlen_equal();
    p.direction = direction;
    p.pad_k = 2;
    v = verdict(flash, p);
    EXPECT_EQ(v.failure, "");
    EXPECT_EQ(v.not_checked,
              std::vector<std::string>{"packing: padding rows after the keys (seqused_k): a dense batch has none"});
    p.pad_k = 0;
    v = verdict(flash, p);
    EXPECT_EQ(v.failure, "");
    EXPECT_TRUE(v.not_checked.empty()) << v.not_checked.front();
  }
}

TEST(Invariance, BatchVariantTilesFailTheBatchSizeCheckNamingTheElement) {
  const Impl& plant = *registry().impl("host.flash_batch_variant_tiles");
  EXPECT_TRUE(plant.bug_needs_invariance());
  ASSERT_TRUE(plant.supports(dense_batch(), kHost).ok);
  const InvarianceVerdict v = verdict(plant, dense_batch());
  EXPECT_EQ(v.failure.rfind("--invariance batch_size: ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("of batch entry 0 is "), std::string::npos) << v.failure;
  EXPECT_NE(v.failure.find("with the entry run alone (a batch of 1)"), std::string::npos) << v.failure;
  EXPECT_TRUE(v.failed_output == "O" || v.failed_output == "lse") << v.failed_output;
  // The same on a varlen batch: its first sequence alone.
  ASSERT_TRUE(plant.supports(varlen_batch(), kHost).ok);
  const InvarianceVerdict packed = verdict(plant, varlen_batch());
  EXPECT_EQ(packed.failure.rfind("--invariance batch_size: ", 0), 0u) << packed.failure;
  EXPECT_NE(packed.failure.find("with the sequence run alone (a batch of 1)"), std::string::npos) << packed.failure;
  // Its blind spot claims nothing where the tiles change a byte.
  const TensorMap in = plant.family_def().make_inputs(dense_batch(), 11);
  const References refs;
  EXPECT_EQ(plant.blind_spot(dense_batch(), CaseEvidence{in, refs, {}}), "");
  // A batch whose rows see at most 32 keys has the same tiles either way: not a case of it.
  sdpa::Problem short_rows = dense_batch();
  short_rows.seq_k = 32;
  EXPECT_FALSE(plant.supports(short_rows, kHost).ok);
  // Only sequence 0 runs alone: its rows decide.
  sdpa::Problem short_first = varlen_batch();
  short_first.seqlens_k = {32, 100, 12};
  EXPECT_FALSE(plant.supports(short_first, kHost).ok);
}

// The varlen layout's own tiles: a dense batch packed, and a packed batch given dense, FAIL the
// packing check; where no row sees more keys than the small tile there is nothing to tell apart.
TEST(Invariance, PackedVariantTilesFailThePackingCheckNamingBothElements) {
  const Impl& plant = *registry().impl("host.flash_packed_variant_tiles");
  EXPECT_TRUE(plant.bug_needs_invariance());
  sdpa::Problem bhsd = dense_batch();
  ASSERT_TRUE(plant.supports(bhsd, kHost).ok);
  InvarianceVerdict v = verdict(plant, bhsd);
  EXPECT_EQ(v.failure.rfind("--invariance packing: ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find(" at "), std::string::npos) << v.failure;  // bhsd's element sits elsewhere packed
  EXPECT_NE(v.failure.find("with the batch packed as 3 varlen sequences (cu_seqlens)"), std::string::npos) << v.failure;
  const TensorMap in = plant.family_def().make_inputs(bhsd, 11);
  EXPECT_EQ(plant.blind_spot(bhsd, CaseEvidence{in, References{}, {}}), "");
  ASSERT_TRUE(plant.supports(varlen_equal(), kHost).ok);
  v = verdict(plant, varlen_equal());
  EXPECT_EQ(v.failure.rfind("--invariance packing: ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("with the batch given dense (bshd)"), std::string::npos) << v.failure;
  EXPECT_FALSE(plant.supports(varlen_batch(), kHost).ok);  // unequal lengths: no dense twin
  sdpa::Problem short_rows = dense_batch();
  short_rows.seq_k = 32;
  EXPECT_FALSE(plant.supports(short_rows, kHost).ok);
  sdpa::Problem masked = dense_batch();
  masked.mask_tensor = sdpa::MaskTensor::boolean;
  EXPECT_EQ(plant.supports(masked, kHost).reason, "the varlen layout takes no attn_mask");
}

// host.flash whose last batch entry's (a varlen batch's last sequence's) first O element is one
// bit off: the entry's bytes depend on where it sits in the batch, not on the batch's size.
class PositionDependent final : public Impl {
 public:
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "test.position_dependent"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem& p, const TensorMap& in, const RunContext& ctx) const override {
    TensorMap out = registry().impl("host.flash")->run(p, in, ctx);
    const auto& q = p.as<sdpa::Problem>();
    HostTensor& o = out.at("O");
    if (q.batch < 2) return out;
    const int64_t last = q.varlen() ? sdpa::cu_seqlens(q.seqlens_q)[q.batch - 1] * q.heads_q * q.head_dim_v
                                    : o.numel() / q.batch * (q.batch - 1);
    o.set_code(last, o.code(last) ^ 1);
    return out;
  }
  std::vector<InvarianceAxis> invariant_axes(const Problem&) const override {
    return {InvarianceAxis::batch_size, InvarianceAxis::batch_position};
  }
};

TEST(Invariance, AnEntryThatDependsOnItsPositionFailsTheBatchPositionCheck) {
  Registry reg;
  register_sdpa_family(reg);
  reg.add(std::make_unique<PositionDependent>());
  const Impl& impl = *reg.impl("test.position_dependent");
  InvarianceVerdict v = verdict(impl, dense_batch());
  EXPECT_EQ(v.failure.rfind("--invariance batch_position: O[2,0,0,0] of batch entry 2 ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("at O[0,0,0,0] with the batch of 3 reversed (entry 2 first)"), std::string::npos)
      << v.failure;
  EXPECT_EQ(v.failed_output, "O");
  // A varlen batch: sequence 2 starts at packed row 47; reversed, it comes first.
  v = verdict(impl, varlen_batch());
  EXPECT_EQ(v.failure.rfind("--invariance batch_position: O[47,0,0] of batch entry 2 ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("at O[0,0,0] with the batch of 3 sequences reversed (sequence 2 first)"), std::string::npos)
      << v.failure;
}

TEST(Invariance, HopperEmulationHoldsItsRowsAndTheNarrowStepsPlantBreaksThem) {
  const InvarianceVerdict held = verdict(*registry().impl("host.emulated_hopper"), rowwise_rows(32));
  EXPECT_EQ(held.failure, "");
  EXPECT_TRUE(held.not_checked.empty());
  const Impl& plant = *registry().impl("host.emulated_hopper_small_m_steps");
  ASSERT_TRUE(plant.supports(rowwise_rows(32), kHost).ok);
  const InvarianceVerdict v = verdict(plant, rowwise_rows(32));
  EXPECT_EQ(v.failure.rfind("--invariance batch_size: d[0,", 0), 0u) << v.failure;
  // Sixteen rows or fewer run the narrow steps whole: nothing to tell apart.
  EXPECT_FALSE(plant.supports(rowwise_rows(16), kHost).ok);
}

TEST(Invariance, ProblemsItCannotCutSayWhyTheyWereNotChecked) {
  const Impl& flash = *registry().impl("host.flash");
  sdpa::Problem one = dense_batch();
  one.batch = 1;
  InvarianceVerdict v = verdict(flash, one);
  ASSERT_EQ(v.not_checked.size(), 2u);  // packing moves a batch of one too
  EXPECT_EQ(v.not_checked[0], "batch_size: a batch of one entry");
  EXPECT_EQ(v.not_checked[1], "batch_position: a batch of one entry");
  v = verdict(flash, varlen_batch());
  EXPECT_EQ(v.not_checked,
            std::vector<std::string>{"packing: sequences of unequal lengths: a dense batch would pad them"});
  sdpa::Problem paged = varlen_batch();
  paged.layout = sdpa::Layout::paged;
  paged.page_size = 16;
  v = verdict(flash, paged);
  ASSERT_EQ(v.not_checked.size(), 3u);
  for (const std::string& n : v.not_checked) EXPECT_NE(n.find("share one KV cache"), std::string::npos) << n;
  sdpa::Problem masked = dense_batch();
  masked.mask_tensor = sdpa::MaskTensor::additive;
  v = verdict(flash, masked);
  EXPECT_EQ(v.not_checked, std::vector<std::string>{"packing: the varlen layout takes no attn_mask"});
  scaled_mm::Problem col = rowwise_rows(32);
  col.a_layout = scaled_mm::Layout::col;
  v = verdict(*registry().impl("host.emulated_hopper"), col);
  ASSERT_FALSE(v.not_checked.empty());
  EXPECT_NE(v.not_checked[0].find("column-major"), std::string::npos) << v.not_checked[0];
  EXPECT_EQ(v.failure, "");
}

// host.flash behind tactics "a" and "b" (the same arithmetic) and "gone" (listed, not offered
// here), declaring the tactic axis.
class SameBytesTactics final : public Impl {
 public:
  explicit SameBytesTactics(std::vector<std::string> tactics) : tactics_(std::move(tactics)) {}
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "test.same_bytes_tactics"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  std::vector<std::string> tactics(const Problem&) const override { return tactics_; }
  TensorMap run(const Problem& p, const TensorMap& in, const RunContext& ctx) const override {
    if (ctx.tactic == "gone") throw TacticUnavailable("the library offers 2 algorithms here");
    return registry().impl("host.flash")->run(p, in, ctx);
  }
  std::vector<InvarianceAxis> invariant_axes(const Problem&) const override { return {InvarianceAxis::tactic}; }

 private:
  std::vector<std::string> tactics_;
};

TEST(Invariance, TacticsThatGiveTheSameBytesHoldTheTacticAxis) {
  Registry reg;
  register_sdpa_family(reg);
  reg.add(std::make_unique<SameBytesTactics>(std::vector<std::string>{"a", "b", "gone"}));
  const InvarianceVerdict v = verdict(*reg.impl("test.same_bytes_tactics"), dense_batch(), "b");
  EXPECT_EQ(v.failure, "");
  EXPECT_EQ(v.not_checked,
            std::vector<std::string>{"tactic: gone is not offered here (the library offers 2 algorithms here)"});
  Registry one;
  register_sdpa_family(one);
  one.add(std::make_unique<SameBytesTactics>(std::vector<std::string>{"a"}));
  EXPECT_EQ(verdict(*one.impl("test.same_bytes_tactics"), dense_batch(), "a").not_checked,
            std::vector<std::string>{"tactic: the impl lists one tactic for this problem"});
}

// host.emulated_split_k's split counts add their partial sums in other associations: the plant
// that declares them invariant FAILs the tactic check, naming both tactics.
TEST(Invariance, SplitCountsThatChangeTheBytesFailTheTacticCheck) {
  const Impl& plant = *registry().impl("host.emulated_split_k_count_variant");
  EXPECT_TRUE(plant.bug_needs_invariance());
  scaled_mm::Problem p = rowwise_rows(32);
  p.out = DType::fp32;  // a 16-bit d would round most of the partial sums' differences away
  ASSERT_TRUE(plant.supports(p, kHost).ok);
  EXPECT_EQ(plant.tactics(p), (std::vector<std::string>{"split_k1", "split_k2", "split_k4"}));
  const InvarianceVerdict v = verdict(plant, p, "split_k2");
  EXPECT_EQ(v.failure.rfind("--invariance tactic: d[", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find(" with tactic split_k2 (the case's) but "), std::string::npos) << v.failure;
  EXPECT_NE(v.failure.find(" with tactic split_k1"), std::string::npos) << v.failure;
  EXPECT_EQ(v.failed_output, "d");
  const TensorMap in = plant.family_def().make_inputs(p, 11);
  EXPECT_EQ(plant.blind_spot(p, CaseEvidence{in, References{}, {}}), "");
  // The family has no cut for the axis: the runner runs the case itself.
  EXPECT_EQ(plant.family_def().invariance_cut(p, in, InvarianceAxis::tactic).why_not,
            "not a cut: the runner runs the case with the impl's other tactics");
}

// An ABI impl: O = the batch size in every element (a result that follows the batch), lse 0.
int32_t any(const void*, const void*, const opcts_arch*, char*, size_t) { return 1; }
opcts_status batch_valued(const void*, const opcts_run_args* a, opcts_report*) {
  const auto* p = static_cast<const opcts_sdpa_params*>(a->params);
  for (int32_t t = 0; t < a->n_tensors; ++t) {
    const opcts_tensor& x = a->tensors[t];
    if (std::strcmp(x.name, "O") != 0 && std::strcmp(x.name, "lse") != 0) continue;
    int64_t n = 1;
    for (int32_t d = 0; d < x.ndim; ++d) n *= x.shape[d];
    const float value = std::strcmp(x.name, "O") == 0 ? static_cast<float>(p->batch) : 0.0f;
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(x.data)[i] = value;
  }
  return OPCTS_OK;
}
uint32_t batch_size_only(const void*, const void*) { return OPCTS_INVARIANT_BATCH_SIZE; }

TEST(Invariance, AnAbiImplDeclaresItsAxesThroughTheDescriptorsCallback) {
  Registry reg;
  register_sdpa_family(reg);
  opcts_impl_desc d{};
  d.struct_size = sizeof d;
  d.family = "sdpa", d.name = "test.batch_valued", d.backend = "host", d.supports = any, d.run = batch_valued;
  d.invariance = batch_size_only;
  reg.add(std::make_unique<AbiImpl>(d, &host_abi_backend()));
  sdpa::Problem p = dense_batch();
  p.dtype = DType::fp32;
  const Impl& impl = *reg.impl("test.batch_valued");
  EXPECT_EQ(impl.invariant_axes(p), std::vector<InvarianceAxis>{InvarianceAxis::batch_size});
  // ABI 1.12's packing and tactic bits; bits no header defines are left out.
  EXPECT_EQ(invariance_axes(OPCTS_INVARIANT_PACKING | OPCTS_INVARIANT_TACTIC | 16u),
            (std::vector<InvarianceAxis>{InvarianceAxis::packing, InvarianceAxis::tactic}));
  const InvarianceVerdict v = verdict(impl, p);
  EXPECT_EQ(v.failure.rfind("--invariance batch_size: O[0,0,0,0] of batch entry 0 is 3 ", 0), 0u) << v.failure;
  // A descriptor of ABI 1.9's size ends before the callback: the bytes after it are not read.
  alignas(opcts_impl_desc) unsigned char raw[sizeof(opcts_impl_desc)];
  std::memset(raw, 0xFF, sizeof raw);
  d.struct_size = offsetof(opcts_impl_desc, invariance);
  d.name = "test.older";
  std::memcpy(raw, &d, d.struct_size);
  reg.add(std::make_unique<AbiImpl>(*reinterpret_cast<const opcts_impl_desc*>(raw), &host_abi_backend()));
  EXPECT_TRUE(reg.impl("test.older")->invariant_axes(p).empty());
}

}  // namespace
}  // namespace opcts
