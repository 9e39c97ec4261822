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

// The case's outputs for `impl` on `p` (seeded inputs) and the checks' verdict on them.
InvarianceVerdict verdict(const Impl& impl, const Problem& p, uint64_t seed = 11) {
  const Family& f = impl.family_def();
  const TensorMap in = f.make_inputs(p, seed);
  const RunContext ctx{&kHost, -1};
  const TensorMap out = impl.run(p, in, ctx);
  return check_invariance(f, impl, kHost, p, in, out,
                          [&](const Problem& sub, const TensorMap& sub_in) { return impl.run(sub, sub_in, ctx); });
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

TEST(Invariance, TakeEntriesFillsTheSubProblemsLayoutByElement) {
  HostTensor t(DType::fp32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) t.set(i, static_cast<double>(i));
  // Rows of 4 elements' storage (a leading dimension of 4), as a strided operand's batch of one has.
  const HostTensor s = take_entries(t, {2, 0}, HostTensor(DType::fp32, {2, 2}, {4, 1}, 6));
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(s.get(0), 4);
  EXPECT_EQ(s.get(1), 5);
  EXPECT_EQ(s.get(2), 0);
  EXPECT_EQ(s.get(3), 1);
  EXPECT_THROW(take_entries(t, {0}, HostTensor(DType::fp32, {2, 2})), std::logic_error);
}

TEST(Invariance, HostFlashHoldsBothAxesOnADenseBatch) {
  const InvarianceVerdict v = verdict(*registry().impl("host.flash"), dense_batch());
  EXPECT_EQ(v.failure, "");
  EXPECT_TRUE(v.not_checked.empty()) << v.not_checked.front();
}

TEST(Invariance, BatchVariantTilesFailTheBatchSizeCheckNamingTheElement) {
  const Impl& plant = *registry().impl("host.flash_batch_variant_tiles");
  EXPECT_TRUE(plant.bug_needs_invariance());
  ASSERT_TRUE(plant.supports(dense_batch(), kHost).ok);
  const InvarianceVerdict v = verdict(plant, dense_batch());
  EXPECT_EQ(v.failure.rfind("--invariance batch_size: ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("of batch entry 0 is "), std::string::npos) << v.failure;
  EXPECT_NE(v.failure.find("in the case's batch of 3 but"), std::string::npos) << v.failure;
  EXPECT_TRUE(v.failed_output == "O" || v.failed_output == "lse") << v.failed_output;
  // Its blind spot claims nothing where the tiles change a byte.
  const TensorMap in = plant.family_def().make_inputs(dense_batch(), 11);
  const References refs;
  EXPECT_EQ(plant.blind_spot(dense_batch(), CaseEvidence{in, refs, {}}), "");
  // A batch whose rows see at most 32 keys has the same tiles either way: not a case of it.
  sdpa::Problem short_rows = dense_batch();
  short_rows.seq_k = 32;
  EXPECT_FALSE(plant.supports(short_rows, kHost).ok);
}

// host.flash whose last batch entry's first O element is one bit off: the entry's bytes depend
// on where it sits in the batch, not on the batch's size.
class PositionDependent final : public Impl {
 public:
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return "test.position_dependent"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem& p, const TensorMap& in, const RunContext& ctx) const override {
    TensorMap out = registry().impl("host.flash")->run(p, in, ctx);
    const int64_t B = p.as<sdpa::Problem>().batch;
    HostTensor& o = out.at("O");
    if (B >= 2) o.set_code(o.numel() / B * (B - 1), o.code(o.numel() / B * (B - 1)) ^ 1);
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
  const InvarianceVerdict v = verdict(*reg.impl("test.position_dependent"), dense_batch());
  EXPECT_EQ(v.failure.rfind("--invariance batch_position: O[2,0,0,0] of batch entry 2 ", 0), 0u) << v.failure;
  EXPECT_NE(v.failure.find("with the batch reversed (entry 2 first)"), std::string::npos) << v.failure;
  EXPECT_EQ(v.failed_output, "O");
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
  ASSERT_EQ(v.not_checked.size(), 2u);
  EXPECT_EQ(v.not_checked[0], "batch_size: a batch of one entry");
  EXPECT_EQ(v.not_checked[1], "batch_position: a batch of one entry");
  sdpa::Problem packed = dense_batch();
  packed.layout = sdpa::Layout::varlen;
  packed.seqlens_q = {40, 7, 12};
  packed.seqlens_k = {100, 9, 12};
  v = verdict(flash, packed);
  ASSERT_FALSE(v.not_checked.empty());
  EXPECT_NE(v.not_checked[0].find("pack their sequences"), std::string::npos) << v.not_checked[0];
  scaled_mm::Problem col = rowwise_rows(32);
  col.a_layout = scaled_mm::Layout::col;
  v = verdict(*registry().impl("host.emulated_hopper"), col);
  ASSERT_FALSE(v.not_checked.empty());
  EXPECT_NE(v.not_checked[0].find("column-major"), std::string::npos) << v.not_checked[0];
  EXPECT_EQ(v.failure, "");
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
