// The run pipeline's pure parts (FLAKE table, records, judging) and a Suite over an injected,
// fake registry: the runner needs no built-in family.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/abi_impl.hpp"
#include "core/errors.hpp"
#include "core/kit_family.hpp"
#include "runner/execute.hpp"
#include "runner/run.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

TEST(RunFlake, DisagreeingRunsAreAFlakeAndRepeatsAreNot) {
  struct Row {
    std::vector<Outcome> runs;
    const char* flake;  // nullptr: not a flake
  };
  const Row rows[] = {
      {{Outcome::FAIL}, nullptr},
      {{Outcome::FAIL, Outcome::FAIL, Outcome::FAIL}, nullptr},  // a failure that repeats stays what it was
      {{Outcome::CRASH, Outcome::PASS}, "runs gave CRASH, PASS"},
      {{Outcome::FAIL, Outcome::FAIL, Outcome::ERROR}, "runs gave FAIL, FAIL, ERROR"},
      {{Outcome::TIMEOUT, Outcome::CRASH}, "runs gave TIMEOUT, CRASH"},
      {{}, nullptr},
  };
  for (const Row& r : rows) {
    const auto f = flake_of(r.runs);
    if (r.flake) {
      ASSERT_TRUE(f.has_value());
      EXPECT_EQ(*f, r.flake);
    } else {
      EXPECT_FALSE(f.has_value());
    }
  }
}

// A family of one integer field and one impl that echoes its input, in a registry of its own.
struct Echo {
  int64_t n = 1;
  bool operator==(const Echo&) const = default;
};

class EchoFamily final : public KitFamily<Echo> {
 public:
  std::string_view name() const override { return "echo"; }
  const kit::FieldTable<Echo>& fields() const override {
    static const kit::FieldTable<Echo> t("echo", {kit::int_always<Echo>("n", &Echo::n, "n", "N", true)},
                                         [](const Echo& e) {
                                           if (e.n < 1) throw std::invalid_argument("n must be >= 1");
                                         });
    return t;
  }
  Cost cost(const Problem& p) const override { return {static_cast<double>(get(p).n), 0}; }
  std::vector<OutputSpec> outputs(const Problem& p) const override { return {{"y", DType::fp32, {get(p).n}}}; }
  TensorMap make_inputs(const Problem& p, uint64_t) const override {
    HostTensor x(DType::fp32, {get(p).n});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 1.0 + static_cast<double>(i));
    return {{"x", x}};
  }
  References reference(const Problem&, const TensorMap& in) const override {
    References r;
    r.exact["y"] = in.at("x").to_f64();
    return r;
  }
  // The contract: n <= 1000; a larger n is a negative case every impl must refuse naming "n".
  std::string expected_error(const Problem& p) const override { return get(p).n > 1000 ? "n" : ""; }
  // For ABI impls on the host backend: the struct is n itself.
  std::vector<unsigned char> abi_params(const Problem& p) const override {
    std::vector<unsigned char> b(sizeof(int64_t));
    std::memcpy(b.data(), &get(p).n, sizeof(int64_t));
    return b;
  }
};

class EchoImpl final : public Impl {
 public:
  std::string_view family() const override { return "echo"; }
  std::string_view name() const override { return "host.echo"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem& p, const ArchInfo&) const override {
    return p.as<Echo>().n > 100 ? Support::no("host.echo takes n <= 100") : Support::yes();
  }
  TensorMap run(const Problem&, const TensorMap& in, const RunContext&) const override { return {{"y", in.at("x")}}; }
};

class RunOnAFakeRegistry : public testing::Test {
 protected:
  void SetUp() override {
    reg_.add(std::make_unique<EchoFamily>());
    reg_.add(std::make_unique<EchoImpl>());
    const std::string dir = testutil::temp_dir();
    const std::string cases = dir + "/cases";
    std::filesystem::create_directories(cases + "/manifests");
    testutil::write(cases, "archs.yaml", "archs:\n  host: {backend: host, caps: []}\n");
    testutil::write(cases, "tolerances.yaml",
                    "tolerances:\n  - family: echo\n    metric: exact\n    why: an echo is exact\n");
    testutil::write(cases, "echo.yaml",
                    "family: echo\nedges:\n"
                    "  - {name: small, tier: smoke, problem: {n: 4}, why: a few values}\n"
                    "  - {name: big, tier: smoke, problem: {n: 200}, why: more than the impl takes}\n");
    testutil::write(
        cases + "/manifests", "host.yaml",
        "arch: host\nxfail:\n  - match: 'echo.host_echo/n4'\n    reason: pretend it fails\n    expect: FAIL\n"
        "    outputs: {y: [exceeds_bound]}\n");
    SuiteOptions o;
    o.cases_dir = cases;
    o.arch = "host";
    suite_ = std::make_unique<Suite>(reg_, o);
  }
  Registry reg_;
  std::unique_ptr<Suite> suite_;
};

TEST_F(RunOnAFakeRegistry, LoadsItsCatalogAndJudgesItsRecords) {
  ASSERT_EQ(suite_->all_cases().size(), 2u);
  const Case& big = suite_->all_cases()[0];
  const Case& small = suite_->all_cases()[1];
  EXPECT_EQ(big.id, "echo.host_echo/n200");
  EXPECT_EQ(suite_->skip_reason(big).value_or(""), "host.echo takes n <= 100");
  EXPECT_FALSE(suite_->skip_reason(small).has_value());

  ReferenceCache cache;
  ResultRecord r = execute_case(*suite_, small, -1, cache);
  const ResultRecord base = base_record(*suite_, small, -1);
  EXPECT_EQ(r.id, base.id);
  EXPECT_EQ(r.seed, base.seed);
  // The cases folder is not the default one: the line names it, so it runs from anywhere.
  EXPECT_EQ(r.repro, "opcts repro 'echo.host_echo/n4' --arch host --cases-dir '" + suite_->options().cases_dir + "'");
  EXPECT_EQ(r.raw_outcome, Outcome::PASS);
  judge(*suite_, r);  // a pass under a strict xfail
  EXPECT_EQ(r.outcome, Outcome::XPASS);
  EXPECT_NE(r.expectation.find("pretend it fails"), std::string::npos) << r.expectation;
  r.raw_outcome = Outcome::ERROR;  // a failure of another kind than the entry expects
  r.message = "boom";
  judge(*suite_, r);
  EXPECT_EQ(r.outcome, Outcome::ERROR);
  EXPECT_NE(r.expectation.find("expects FAIL of y: exceeds_bound, got ERROR"), std::string::npos) << r.expectation;
}

// Options of a host suite over a fresh cases folder: the echo family's one small problem (n = 4),
// an empty manifest and one tolerance entry for echo whose keys after `family` are `entry`.
SuiteOptions one_echo_problem(const std::string& entry) {
  const std::string cases = testutil::temp_dir() + "/cases";
  std::filesystem::create_directories(cases + "/manifests");
  testutil::write(cases, "archs.yaml", "archs:\n  host: {backend: host, caps: []}\n");
  testutil::write(cases, "tolerances.yaml", "tolerances:\n  - family: echo\n" + entry);
  testutil::write(cases, "echo.yaml",
                  "family: echo\nedges:\n  - {name: small, tier: smoke, problem: {n: 4}, why: w}\n");
  testutil::write(cases + "/manifests", "host.yaml", "arch: host\n");
  SuiteOptions o;
  o.cases_dir = cases;
  o.arch = "host";
  return o;
}

// An impl whose run says, through RunContext::note, that a check did not apply to it (as the
// CUDA backend does when a run waits out its stream gate); `wrong` makes its output wrong.
class NotedEchoImpl final : public Impl {
 public:
  explicit NotedEchoImpl(bool wrong) : wrong_(wrong) {}
  std::string_view family() const override { return "echo"; }
  std::string_view name() const override { return wrong_ ? "host.noted_wrong" : "host.noted"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem&, const TensorMap& in, const RunContext& ctx) const override {
    if (ctx.note) *ctx.note = "stream check not applied: a test's note";
    HostTensor y = in.at("x");
    if (wrong_) y.set(0, 2 * y.get(0));
    return {{"y", y}};
  }

 private:
  bool wrong_;
};

// A pass that a backend check did not cover says so in its message; a failure keeps its own
// message (the manifest's message patterns match that), without the note.
TEST(RunNote, APassCarriesTheNoteAndAFailureKeepsItsMessage) {
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<NotedEchoImpl>(false));
  reg.add(std::make_unique<NotedEchoImpl>(true));
  const Suite suite(reg, one_echo_problem("    metric: exact\n    why: an echo is exact\n"));
  ASSERT_EQ(suite.all_cases().size(), 2u);
  ReferenceCache cache;
  for (const Case& c : suite.all_cases()) {
    const ResultRecord r = execute_case(suite, c, -1, cache);
    if (c.id == "echo.host_noted/n4") {
      EXPECT_EQ(r.raw_outcome, Outcome::PASS);
      EXPECT_EQ(r.message, "stream check not applied: a test's note");
      EXPECT_EQ(parse_json_line(to_json_line(r)).message, r.message);
    } else {
      EXPECT_EQ(c.id, "echo.host_noted_wrong/n4");
      EXPECT_EQ(r.raw_outcome, Outcome::FAIL);
      EXPECT_EQ(r.message.find("stream check"), std::string::npos) << r.message;
      EXPECT_FALSE(r.message.empty());
    }
  }
}

// A declared accumulation the reference has no bound for stops the case with an ERROR that
// names it, rather than judging the output with no bound at all.
TEST(RunDeclaredAccumulation, AnUnknownModelIsAnErrorNamingIt) {
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<EchoImpl>());
  const Suite suite(reg, one_echo_problem("    metric: ref_relative\n    factor: 2\n    accumulation: per_tile\n"
                                          "    why: a model the echo reference knows nothing of\n"));
  ReferenceCache cache;
  const ResultRecord r = execute_case(suite, suite.all_cases().at(0), -1, cache);
  EXPECT_EQ(r.raw_outcome, Outcome::ERROR);
  EXPECT_NE(r.message.find("no bound for accumulation 'per_tile'"), std::string::npos) << r.message;
}

// The record says where its time went: the case that made the problem's inputs and references
// carries their times, a second case of the same problem shares them (0), and the phases come
// back from the results line.
TEST_F(RunOnAFakeRegistry, RecordsThePhasesOfItsTime) {
  const Case& small = suite_->all_cases()[1];
  ReferenceCache cache;
  const ResultRecord first = execute_case(*suite_, small, -1, cache);
  const ResultRecord again = execute_case(*suite_, small, -1, cache);
  EXPECT_GT(first.inputs_ms + first.ref_ms, 0.0);
  EXPECT_GT(first.device_ms, 0.0);
  EXPECT_LE(first.inputs_ms + first.ref_ms + first.device_ms + first.compare_ms, first.ms);
  EXPECT_EQ(again.inputs_ms, 0.0);
  EXPECT_EQ(again.ref_ms, 0.0);
  EXPECT_GT(again.device_ms, 0.0);
  const ResultRecord back = parse_json_line(to_json_line(first));
  EXPECT_EQ(back.inputs_ms, first.inputs_ms);
  EXPECT_EQ(back.ref_ms, first.ref_ms);
  EXPECT_EQ(back.device_ms, first.device_ms);
  EXPECT_EQ(back.compare_ms, first.compare_ms);
}

// An echo impl for negative cases: what its run does with n > 1000, and whether its supports()
// declines such an n (as an impl declines what it does not implement).
class RefusalImpl final : public Impl {
 public:
  enum class Run { accepts, refuses_n, refuses_other, throws };
  RefusalImpl(std::string name, Run run, bool declines, bool planted = false, std::string unavailable = "")
      : name_(std::move(name)),
        run_(run),
        declines_(declines),
        planted_(planted),
        unavailable_(std::move(unavailable)) {}
  std::string_view family() const override { return "echo"; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem& p, const ArchInfo&) const override {
    return declines_ && p.as<Echo>().n > 100 ? Support::no(name_ + " takes n <= 100") : Support::yes();
  }
  std::string unavailable() const override { return unavailable_; }
  bool planted() const override { return planted_; }
  TensorMap run(const Problem& p, const TensorMap& in, const RunContext&) const override {
    if (p.as<Echo>().n > 1000) {
      if (run_ == Run::refuses_n) throw InvalidArgument("n", "n must be <= 1000");
      if (run_ == Run::refuses_other) throw InvalidArgument("m", "not n");
      if (run_ == Run::throws) throw std::runtime_error("status 15");
    }
    return {{"y", in.at("x")}};
  }

 private:
  std::string name_;
  Run run_;
  bool declines_, planted_;
  std::string unavailable_;
};

// A negative case reaches the impl's run whatever its supports() says: an impl that declines
// the invalid problem there and accepts it in run FAILs (it was a SKIP, which hid it). A
// supports() decline only turns a refusal that is not the contract's into a SKIP (the impl does
// not implement the problem's rest); planted impls and an impl that cannot run here still SKIP.
TEST(RunNegativeCase, SupportsNeverSkipsItBeforeTheRun) {
  using R = RefusalImpl::Run;
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<RefusalImpl>("host.accepts", R::accepts, true));
  reg.add(std::make_unique<RefusalImpl>("host.refuses", R::refuses_n, true));
  reg.add(std::make_unique<RefusalImpl>("host.other", R::refuses_other, true));
  reg.add(std::make_unique<RefusalImpl>("host.other_supported", R::refuses_other, false));
  reg.add(std::make_unique<RefusalImpl>("host.status", R::throws, false));
  reg.add(std::make_unique<RefusalImpl>("host.planted", R::accepts, true, true));
  reg.add(std::make_unique<RefusalImpl>("host.gone", R::accepts, false, false, "host.gone: built without it"));
  SuiteOptions o = one_echo_problem("    metric: exact\n    why: an echo is exact\n");
  testutil::write(o.cases_dir, "echo.yaml",
                  "family: echo\nedges:\n  - {name: bad, tier: smoke, problem: {n: 2000}, why: w}\n");
  o.include_planted = true;
  const Suite suite(reg, o);
  struct Row {
    const char* id;
    std::optional<std::string> skip;  // Suite::skip_reason
    Outcome raw;                      // execute_case, when it runs
    std::vector<Failure> failures;
    const char* message;
  };
  const Row rows[] = {
      {"echo.host_accepts/n2000",
       std::nullopt,
       Outcome::FAIL,
       {{"", FailureKind::accepted_invalid, 0, 0}},
       "accepted an invalid 'n'"},
      {"echo.host_refuses/n2000", std::nullopt, Outcome::PASS, {}, ""},
      {"echo.host_other/n2000",
       std::nullopt,
       Outcome::SKIP,
       {},
       "host.other takes n <= 100 (a negative case for 'n', refused for what the impl does not implement: invalid "
       "argument 'm'"},
      {"echo.host_other_supported/n2000",
       std::nullopt,
       Outcome::FAIL,
       {{"", FailureKind::wrong_refusal, 0, 0}},
       "refused the wrong argument: invalid argument 'm'"},
      {"echo.host_status/n2000",
       std::nullopt,
       Outcome::FAIL,
       {{"", FailureKind::wrong_refusal, 0, 0}},
       "expected InvalidArgument naming 'n', got: status 15"},
      {"echo.host_planted/n2000", "host.planted takes n <= 100", Outcome::SKIP, {}, ""},
      {"echo.host_gone/n2000", "host.gone: built without it", Outcome::SKIP, {}, ""},
  };
  ASSERT_EQ(suite.all_cases().size(), std::size(rows));
  ReferenceCache cache;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.id);
    const auto it =
        std::find_if(suite.all_cases().begin(), suite.all_cases().end(), [&](const Case& c) { return c.id == row.id; });
    ASSERT_NE(it, suite.all_cases().end());
    EXPECT_EQ(suite.skip_reason(*it), row.skip);
    if (row.skip) continue;
    const ResultRecord r = execute_case(suite, *it, -1, cache);
    EXPECT_EQ(r.raw_outcome, row.raw);
    EXPECT_EQ(r.failures, row.failures);
    EXPECT_NE(r.message.find(row.message), std::string::npos) << r.message;
  }
}

// An ABI echo on the host backend that also writes the fp32 element past y's end (the guard's
// -0.0 becomes +0.0); `wrong` doubles y[0] as well.
opcts_status echo_spill(const void* impl_data, const opcts_run_args* args, opcts_report*) {
  const opcts_tensor& x = args->tensors[0];
  const opcts_tensor& y = args->tensors[args->n_tensors - 1];
  auto* out = static_cast<float*>(y.data);
  std::memcpy(out, x.data, static_cast<size_t>(y.shape[0]) * sizeof(float));
  out[y.shape[0]] = 0.0f;
  if (impl_data) out[0] *= 2;
  return OPCTS_OK;
}

// A write outside an output is its own failure kind on that output, and the values are still
// judged: a typed xfail for the breach absorbs it alone, not a wrong value beside it.
TEST(RunFailureKinds, AWriteOutsideIsJudgedWithTheValues) {
  static const int wrong = 1;
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  for (const auto& [name, data] : {std::pair{"host.spill", static_cast<const void*>(nullptr)},
                                   std::pair{"host.spill_wrong", static_cast<const void*>(&wrong)}}) {
    opcts_impl_desc d{};
    d.struct_size = sizeof d;
    d.family = "echo";
    d.name = name;
    d.backend = "host";
    d.run = echo_spill;
    d.impl_data = data;
    reg.add(std::make_unique<AbiImpl>(d, &host_abi_backend()));
  }
  SuiteOptions o = one_echo_problem("    metric: exact\n    why: an echo is exact\n");
  testutil::write(o.cases_dir + "/manifests", "host.yaml",
                  "arch: host\nxfail:\n  - match: 'echo.host_spill*'\n    reason: r\n    expect: FAIL\n"
                  "    outputs: {y: [written_outside]}\n");
  const Suite suite(reg, o);
  ReferenceCache cache;
  ASSERT_EQ(suite.all_cases().size(), 2u);
  ResultRecord spill = execute_case(suite, suite.all_cases()[0], -1, cache);
  ResultRecord both = execute_case(suite, suite.all_cases()[1], -1, cache);
  ASSERT_EQ(spill.id, "echo.host_spill/n4");
  EXPECT_EQ(spill.raw_outcome, Outcome::FAIL);
  EXPECT_EQ(spill.failures, (std::vector<Failure>{{"y", FailureKind::written_outside, 0, 0}}));
  EXPECT_NE(spill.message.find("host.spill wrote outside its output: bytes [+0, +4) past the end of 'y'"),
            std::string::npos)
      << spill.message;
  ASSERT_EQ(spill.outputs.size(), 1u);  // compared all the same
  EXPECT_EQ(spill.outputs[0].mismatches, 0);
  EXPECT_EQ(both.raw_outcome, Outcome::FAIL);
  EXPECT_EQ(both.failures, (std::vector<Failure>{{"y", FailureKind::exceeds_bound, 1, INFINITY},
                                                 {"y", FailureKind::written_outside, 0, 0}}));
  judge(suite, spill);
  judge(suite, both);
  EXPECT_EQ(spill.outcome, Outcome::XFAIL);
  EXPECT_EQ(both.outcome, Outcome::FAIL);
  EXPECT_NE(both.expectation.find("got FAIL: y exceeds_bound ×inf (1 element)"), std::string::npos) << both.expectation;
  // The kinds travel with the record.
  EXPECT_EQ(parse_json_line(to_json_line(both)).failures, both.failures);
}

}  // namespace
}  // namespace opcts
