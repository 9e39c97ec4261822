// `opcts run --capture` (runner/capture.hpp, Impl::run_captured): a run recorded on other inputs
// and replayed on the case's must compute from what its buffers hold at replay time. The host's
// equivalent of a graph, the checks' failures (a kept result, a baked value, replays that differ,
// an input written), the planted scale plant, and an impl that holds the contract.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "core/errors.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "families/sdpa/sdpa.hpp"
#include "runner/capture.hpp"
#include "runner/output_bytes.hpp"

namespace opcts {

namespace {

const ArchInfo kHost{"host", "host"};

// An sdpa impl that runs host.flash, except as `Twist` says; registered beside it.
enum class Twist { none, keep_by_address, count_calls, scribble, not_deterministic };

class TwistedFlash final : public Impl {
 public:
  TwistedFlash(const Impl& flash, Twist t, std::string name) : flash_(flash), twist_(t), name_(std::move(name)) {}
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  bool deterministic(const Problem&, std::string_view) const override { return twist_ != Twist::not_deterministic; }
  TensorMap run(const Problem& p, const TensorMap& in, const RunContext& ctx) const override {
    const std::byte* q = in.at("q").data();
    if (twist_ == Twist::keep_by_address && kept_at_ == q) return kept_;
    TensorMap out = flash_.run(p, in, ctx);
    if (twist_ == Twist::keep_by_address) {
      kept_at_ = q;
      kept_ = out;
    }
    if (twist_ == Twist::count_calls && ++calls_ % 3 == 0) {  // every third call: one element a bit off
      HostTensor& o = out.at("O");
      o.set_code(0, o.code(0) ^ 1);
    }
    if (twist_ == Twist::scribble) const_cast<std::byte*>(q)[0] ^= std::byte{1};
    return out;
  }

 private:
  const Impl& flash_;
  Twist twist_;
  std::string name_;
  mutable const std::byte* kept_at_ = nullptr;
  mutable TensorMap kept_;
  mutable int calls_ = 0;
};

// What each call of an ABI impl on the host backend saw: its tensors' addresses, and whether its
// outputs arrived poisoned.
struct Seen {
  std::vector<const void*> addresses;
  bool outputs_poisoned = true;
};
std::vector<Seen>& seen() {
  static std::vector<Seen> s;
  return s;
}
int32_t any(const void*, const void*, const opcts_arch*, char*, size_t) { return 1; }
opcts_status record_and_zero(const void*, const opcts_run_args* a, opcts_report*) {
  Seen s;
  for (int32_t i = 0; i < a->n_tensors; ++i) {
    const opcts_tensor& x = a->tensors[i];
    s.addresses.push_back(x.data);
    if (!x.is_output) continue;
    int64_t n = 1;
    for (int32_t d = 0; d < x.ndim; ++d) n *= x.shape[d];
    const auto* bytes = static_cast<const unsigned char*>(x.data);
    for (int64_t k = 0; k < n * 4; ++k) s.outputs_poisoned = s.outputs_poisoned && bytes[k] == 0xFF;
    std::memset(x.data, 0, static_cast<size_t>(n) * 4);
  }
  seen().push_back(s);
  return OPCTS_OK;
}

Registry& registry() {
  static Registry reg = [] {
    Registry r;
    register_builtins(r);
    const Impl& flash = *r.impl("host.flash");
    const std::map<Twist, const char*> names{{Twist::keep_by_address, "host.test_keep_by_address"},
                                             {Twist::count_calls, "host.test_count_calls"},
                                             {Twist::scribble, "host.test_scribble"},
                                             {Twist::not_deterministic, "host.test_not_deterministic"}};
    for (const auto& [twist, name] : names) r.add(std::make_unique<TwistedFlash>(flash, twist, name));
    opcts_impl_desc record{};  // an ABI impl on the host backend that records what it was handed
    record.struct_size = sizeof record;
    record.family = "sdpa", record.name = "test.record", record.backend = "host";
    record.supports = any, record.run = record_and_zero;
    r.add(std::make_unique<AbiImpl>(record, &host_abi_backend()));
    return r;
  }();
  return reg;
}

// A causal fp16 batch of two: 24 queries over 40 keys, GQA 2:1.
sdpa::Problem small_sdpa() {
  return registry().family("sdpa")->parse_id("fp16_b2_hq2_hkv1_sq24_sk40_d32_causal_lr")->as<sdpa::Problem>();
}

// --capture's checks on impl's run of p: the plain run's outputs go in as `plain`.
struct Checked {
  TensorMap judged, plain;
  std::string note;
};
Checked checked(const std::string& impl_name, const Problem& p) {
  const Impl& impl = *registry().impl(impl_name);
  const Family& f = impl.family_def();
  const TensorMap in = f.make_inputs(p, case_seed(f, p));
  const RunContext ctx{&kHost, -1};
  Checked c;
  c.plain = impl.run(p, in, ctx);
  c.judged = check_capture(f, impl, p, in, c.plain, ctx, c.note);
  return c;
}

// The kind and message of the ContractBreach check_capture throws ("" kind none).
std::pair<std::optional<FailureKind>, std::string> breach_of(const std::string& impl_name, const Problem& p) {
  try {
    checked(impl_name, p);
  } catch (const ContractBreach& e) {
    return {e.kind, e.what()};
  }
  return {std::nullopt, ""};
}

TEST(Capture, HostFlashsReplayIsItsPlainRun) {
  const Checked c = checked("host.flash", small_sdpa());
  EXPECT_TRUE(same_bytes(c.judged, c.plain));
  EXPECT_EQ(c.note, "");
}

// The default run_captured hands the impl the same buffers three times: the capture-time inputs
// first, then the case's copied into them.
TEST(Capture, TheHostsRecordingKeepsItsBuffersAndRefillsThem) {
  const Impl& impl = *registry().impl("host.flash");
  const Family& f = impl.family_def();
  const Problem p = small_sdpa();
  const TensorMap a = f.make_inputs(p, capture_seed(f, p)), b = f.make_inputs(p, case_seed(f, p));
  ASSERT_FALSE(same_bytes(a, b));
  const RunContext ctx{&kHost, -1};
  const CapturedRun r = impl.run_captured(p, a, b, ctx);
  EXPECT_TRUE(same_bytes(r.at_capture, impl.run(p, a, ctx)));
  EXPECT_TRUE(same_bytes(r.first, impl.run(p, b, ctx)));
  EXPECT_TRUE(same_bytes(r.first, r.second));
  EXPECT_FALSE(same_bytes(r.first, r.at_capture));
}

TEST(Capture, AResultKeptByAddressIsStale) {
  const auto [kind, message] = breach_of("host.test_keep_by_address", small_sdpa());
  ASSERT_EQ(kind, FailureKind::stale_capture) << message;
  EXPECT_NE(message.find("gave the very bytes it gave on the inputs it was recorded with"), std::string::npos)
      << message;
}

// Calls 1 (plain), 2 (capture), 3 (first replay: one bit off), 4 (second replay).
TEST(Capture, AReplayThatDiffersFromThePlainRunFailsNamingTheElement) {
  const auto [kind, message] = breach_of("host.test_count_calls", small_sdpa());
  ASSERT_EQ(kind, FailureKind::replay_differs) << message;
  EXPECT_EQ(message.rfind("--capture: O[0,0,0,0] is ", 0), 0u) << message;
  EXPECT_NE(message.find("in a plain run on the case's inputs but"), std::string::npos) << message;
}

TEST(Capture, AnImplThatWritesItsInputBuffersIsRefused) {
  const auto [kind, message] = breach_of("host.test_scribble", small_sdpa());
  ASSERT_EQ(kind, FailureKind::wrote_input) << message;
  EXPECT_NE(message.find("wrote into its input 'q'"), std::string::npos) << message;
}

TEST(Capture, ANondeterministicImplsReplayIsJudgedNotCompared) {
  const Checked c = checked("host.test_not_deterministic", small_sdpa());
  EXPECT_NE(c.note.find("replays not compared byte for byte"), std::string::npos) << c.note;
}

// The planted scale plant: a plain run is right (its buffers are its own), the replay uses the
// scales read at capture.
TEST(Capture, ScalesKeptFromCaptureMakeTheReplayDiffer) {
  const Impl& plant = *registry().impl("host.emulated_scales_at_capture");
  EXPECT_TRUE(plant.planted());
  EXPECT_TRUE(plant.bug_needs_capture());
  const scaled_mm::Problem p{.m = 32, .n = 48, .k = 256, .recipe = scaled_mm::Recipe::rowwise, .out = DType::bf16};
  ASSERT_TRUE(plant.supports(p, kHost).ok);
  const Family& f = plant.family_def();
  const TensorMap in = f.make_inputs(p, case_seed(f, p));
  const RunContext ctx{&kHost, -1};
  EXPECT_TRUE(same_bytes(plant.run(p, in, ctx), registry().impl("host.emulated")->run(p, in, ctx)));
  const auto [kind, message] = breach_of("host.emulated_scales_at_capture", p);
  ASSERT_EQ(kind, FailureKind::replay_differs) << message;
  // Its blind spot: none on these random scales.
  EXPECT_EQ(plant.blind_spot(p, CaseEvidence{in, {}, {}}), "");
}

// The host backend's recording: one set of buffers for the capture and both replays, the case's
// inputs copied into them, every output poisoned again before each call.
TEST(Capture, TheHostBackendKeepsItsAddressesAndPoisonsEachReplay) {
  const Impl& impl = *registry().impl("test.record");
  sdpa::Problem p = small_sdpa();
  p.dtype = DType::fp32;
  const Family& f = impl.family_def();
  const TensorMap a = f.make_inputs(p, capture_seed(f, p)), b = f.make_inputs(p, case_seed(f, p));
  seen().clear();
  const CapturedRun r = impl.run_captured(p, a, b, RunContext{&kHost, -1});
  ASSERT_EQ(seen().size(), 3u);
  for (const Seen& s : seen()) {
    EXPECT_EQ(s.addresses, seen().front().addresses);
    EXPECT_TRUE(s.outputs_poisoned);
  }
  EXPECT_TRUE(same_bytes(r.first, r.at_capture));  // all zeros: constant, so not stale
  EXPECT_TRUE(constant_outputs(r.first));
}

}  // namespace
}  // namespace opcts
