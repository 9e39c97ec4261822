// Table tests of the gate: every (outcome × manifest entry) pair, the plan (MISSING, extra ids), stale entries.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "judge/gate.hpp"
#include "judge/manifest.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

// One entry per kind the gate knows; ids "gate.host_x/e_<entry>_<outcome>" pick their entry.
constexpr const char* kManifest = R"yaml(arch: sm90
skip:
  - match: "gate.host_x/e_skip_*"
    reason: "the manifest skips these"
xfail:
  - match: "gate.host_x/e_strict_*"
    reason: "known bad (strict)"
    expect: FAIL
    outputs: {O: [exceeds_bound]}
  - match: "gate.host_x/e_lenient_*"
    reason: "known bad (not strict)"
    expect: FAIL
    outputs: {O: [exceeds_bound]}
    strict: false
  - match: "gate.host_x/e_crash_*"
    reason: "known crash"
    expect: CRASH
  - match: "gate.host_x/e_refused_*"
    reason: "the library refuses this combination"
    expect: ERROR
    message: "status 15"
  - match: "gate.host_x/nothing_matches_this_*"
    reason: "a stale entry"
    expect: FAIL
    case: [accepted_invalid]
flaky:
  - match: "gate.host_x/e_flaky_*"
    reason: "atomics order varies"
    reruns: 3
)yaml";

// The file's entries plus the xfail a planted impl implies (runner/suite.cpp).
Manifest manifest() {
  const auto dir = testutil::temp_dir();
  Manifest m = Manifest::load(testutil::write(dir, "sm90.yaml", kManifest));
  ManifestEntry planted;
  planted.kind = EntryKind::xfail;
  planted.match = "gate.host_x/e_planted_*";
  planted.reason = "planted bug: must fail";
  planted.source = "planted impl host.x";
  planted.planted = true;
  m.append(planted);
  return m;
}

ResultRecord rec(const std::string& entry, Outcome raw, const std::string& message = "what happened") {
  ResultRecord r;
  r.id = "gate.host_x/e_" + entry + "_" + std::string(to_string(raw)) + (message == "what happened" ? "" : "_m");
  r.family = "gate";
  r.impl = "host.x";
  r.arch = "sm90";
  r.outcome = r.raw_outcome = raw;
  r.message = message;
  // A FAIL of the kind the strict and lenient entries expect.
  if (raw == Outcome::FAIL) r.failures = {{"O", FailureKind::exceeds_bound, 3, 2.0}};
  return r;
}

struct Row {
  const char* entry;  // none, strict, lenient, crash, refused, planted, skip, flaky
  Outcome raw;
  Outcome judged;  // the gate's outcome
  bool fatal;
  const char* message = "what happened";  // the raw message (the refused entry's pattern is "status 15")
};

// The whole table. Raw outcomes are those a run can give (XFAIL/XPASS only come from a
// manifest; MISSING only from the gate).
const std::vector<Row> kTable = {
    {"none", Outcome::PASS, Outcome::PASS, false},
    {"none", Outcome::FAIL, Outcome::FAIL, true},
    {"none", Outcome::ERROR, Outcome::ERROR, true},
    {"none", Outcome::CRASH, Outcome::CRASH, true},
    {"none", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"none", Outcome::SKIP, Outcome::SKIP, false},
    {"none", Outcome::FLAKE, Outcome::FLAKE, true},
    {"none", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    // An xfail entry expects one failure (`expect: FAIL`); any other failure is unexpected:
    // a wrong result is no refusal, and a crash hides behind no expected FAIL.
    {"strict", Outcome::PASS, Outcome::XPASS, true},
    {"strict", Outcome::FAIL, Outcome::XFAIL, false},
    {"strict", Outcome::ERROR, Outcome::ERROR, true},
    {"strict", Outcome::CRASH, Outcome::CRASH, true},
    {"strict", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"strict", Outcome::SKIP, Outcome::SKIP, false},
    {"strict", Outcome::FLAKE, Outcome::FLAKE, true},  // xfail does not cover flakes: flaky does
    {"strict", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    {"lenient", Outcome::PASS, Outcome::PASS, false},
    {"lenient", Outcome::FAIL, Outcome::XFAIL, false},
    {"lenient", Outcome::ERROR, Outcome::ERROR, true},
    {"lenient", Outcome::CRASH, Outcome::CRASH, true},
    {"lenient", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"lenient", Outcome::SKIP, Outcome::SKIP, false},
    {"lenient", Outcome::FLAKE, Outcome::FLAKE, true},
    {"lenient", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    {"crash", Outcome::PASS, Outcome::XPASS, true},
    {"crash", Outcome::FAIL, Outcome::FAIL, true},
    {"crash", Outcome::ERROR, Outcome::ERROR, true},
    {"crash", Outcome::CRASH, Outcome::XFAIL, false},
    {"crash", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"crash", Outcome::SKIP, Outcome::SKIP, false},
    {"crash", Outcome::FLAKE, Outcome::FLAKE, true},
    {"crash", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    // `expect: ERROR` with `message: "status 15"`: only that refusal; another error, or the
    // library accepting the call and returning wrong numbers, fails the gate.
    {"refused", Outcome::PASS, Outcome::XPASS, true},
    {"refused", Outcome::FAIL, Outcome::FAIL, true},
    {"refused", Outcome::ERROR, Outcome::ERROR, true},
    {"refused", Outcome::ERROR, Outcome::XFAIL, false, "cuBLASLt status 15: NOT_SUPPORTED"},
    {"refused", Outcome::CRASH, Outcome::CRASH, true},
    {"refused", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"refused", Outcome::SKIP, Outcome::SKIP, false},
    {"refused", Outcome::FLAKE, Outcome::FLAKE, true},
    {"refused", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    // A planted impl's case: caught only by a wrong result (FAIL); a PASS missed the bug.
    {"planted", Outcome::PASS, Outcome::XPASS, true},
    {"planted", Outcome::FAIL, Outcome::XFAIL, false},
    {"planted", Outcome::ERROR, Outcome::ERROR, true},
    {"planted", Outcome::CRASH, Outcome::CRASH, true},
    {"planted", Outcome::TIMEOUT, Outcome::TIMEOUT, true},
    {"planted", Outcome::SKIP, Outcome::SKIP, false},
    {"planted", Outcome::FLAKE, Outcome::FLAKE, true},
    {"planted", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},

    {"skip", Outcome::PASS, Outcome::SKIP, false},  // ran under another manifest: a note
    {"skip", Outcome::FAIL, Outcome::SKIP, false},
    {"skip", Outcome::ERROR, Outcome::SKIP, false},
    {"skip", Outcome::CRASH, Outcome::SKIP, false},
    {"skip", Outcome::TIMEOUT, Outcome::SKIP, false},
    {"skip", Outcome::SKIP, Outcome::SKIP, false},
    {"skip", Outcome::FLAKE, Outcome::SKIP, false},
    {"skip", Outcome::MISTRUSTED, Outcome::SKIP, false},

    {"flaky", Outcome::PASS, Outcome::PASS, false},
    {"flaky", Outcome::FAIL, Outcome::FAIL, false},  // known flaky: reported, not fatal
    {"flaky", Outcome::ERROR, Outcome::ERROR, false},
    {"flaky", Outcome::CRASH, Outcome::CRASH, false},
    {"flaky", Outcome::TIMEOUT, Outcome::TIMEOUT, false},
    {"flaky", Outcome::SKIP, Outcome::SKIP, false},
    {"flaky", Outcome::FLAKE, Outcome::FLAKE, false},
    {"flaky", Outcome::MISTRUSTED, Outcome::MISTRUSTED, true},  // untrustworthy output is no flake
};

std::string row_name(const Row& row) { return std::string(row.entry) + " × " + std::string(to_string(row.raw)); }

TEST(Gate, EveryOutcomeUnderEveryEntryRawOrAlreadyMapped) {
  const Manifest m = manifest();
  for (const Row& row : kTable) {
    ResultRecord raw = rec(row.entry, row.raw, row.message);
    // The same result as a run with this manifest wrote it: outcome mapped, raw kept.
    ResultRecord mapped = raw;
    mapped.outcome = apply_expectation(row.raw, row.message, raw.failures, m.find(EntryKind::xfail, raw.id));
    for (const ResultRecord& r : {raw, mapped}) {
      EXPECT_EQ(gate_outcome(r, m), row.judged) << row_name(row);
      const GateVerdict v = gate({r}, m, {r.id});
      EXPECT_EQ(v.passed(), !row.fatal) << row_name(row) << "\n" << format_verdict(v, "sm90");
      EXPECT_EQ(v.counts.at(row.judged), 1u) << row_name(row);
      if (row.fatal) {
        ASSERT_EQ(v.offending.size(), 1u) << row_name(row);
        EXPECT_EQ(v.offending[0].id, r.id);
        EXPECT_EQ(v.offending[0].outcome, row.judged);
        EXPECT_NE(format_verdict(v, "sm90").find(r.id), std::string::npos) << "the verdict names the case";
      }
    }
  }
}

TEST(Gate, TableCoversEveryRunOutcomeUnderEveryEntry) {
  for (const char* entry : {"none", "strict", "lenient", "crash", "refused", "planted", "skip", "flaky"})
    for (Outcome o : {Outcome::PASS, Outcome::FAIL, Outcome::ERROR, Outcome::CRASH, Outcome::TIMEOUT, Outcome::SKIP,
                      Outcome::FLAKE, Outcome::MISTRUSTED}) {
      int n = 0;
      for (const Row& row : kTable) n += std::string(row.entry) == entry && row.raw == o;
      EXPECT_EQ(n, 1 + (std::string(entry) == "refused" && o == Outcome::ERROR)) << entry << " × " << to_string(o);
    }
}

// A typed FAIL entry absorbs only the failures it names: the same kind on a second output, or
// another kind on the named one, fails the gate and says which (raw records and records a run
// already mapped alike, as merged JUnit brings them).
TEST(Gate, AFailOfAnotherKindOrOutputIsUnexpected) {
  const Manifest m = manifest();
  const std::vector<std::pair<std::vector<Failure>, std::string>> rows = {
      {{{"O", FailureKind::exceeds_bound, 3, 2.0}, {"lse", FailureKind::exceeds_bound, 1, 1.5}},
       "lse exceeds_bound ×1.5 (1 element)"},
      {{{"O", FailureKind::nonfinite, 16384, 0}}, "O nonfinite (16384 elements)"},
      {{{"O", FailureKind::exceeds_bound, 3, 2.0}, {"", FailureKind::wrote_input, 0, 0}}, "wrote_input"},
      {{}, "no failure kind recorded"},
  };
  for (const auto& [failures, named] : rows) {
    ResultRecord r = rec("strict", Outcome::FAIL);
    r.failures = failures;
    for (const Outcome mapped : {Outcome::FAIL, Outcome::XFAIL}) {
      r.outcome = mapped;
      r.raw_outcome = mapped;  // an older record holds only the mapped outcome
      EXPECT_EQ(gate_outcome(r, m), Outcome::FAIL) << named;
      const GateVerdict v = gate({r}, m, {r.id});
      ASSERT_EQ(v.offending.size(), 1u) << named;
      EXPECT_NE(v.offending[0].why.find("expects FAIL of O: exceeds_bound, got FAIL: " + named), std::string::npos)
          << v.offending[0].why;
    }
  }
}

TEST(Gate, AnUnmetXfailSaysWhatChanged) {
  const GateVerdict v = gate({rec("refused", Outcome::FAIL)}, manifest(), {});
  ASSERT_EQ(v.offending.size(), 1u);
  EXPECT_NE(v.offending[0].why.find("expects ERROR matching 'status 15', got FAIL"), std::string::npos)
      << v.offending[0].why;
  const GateVerdict w = gate({rec("refused", Outcome::ERROR, "status 7")}, manifest(), {});
  ASSERT_EQ(w.offending.size(), 1u);
  EXPECT_NE(w.offending[0].why.find("got ERROR with another message"), std::string::npos) << w.offending[0].why;
}

TEST(Gate, XpassSaysRemoveTheEntry) {
  const Manifest m = manifest();
  const GateVerdict v = gate({rec("strict", Outcome::PASS)}, m, {});
  ASSERT_EQ(v.offending.size(), 1u);
  EXPECT_NE(v.offending[0].why.find("remove this entry: the case now passes"), std::string::npos);
}

TEST(Gate, APlantedPassSaysTheBugWasNotCaught) {
  const GateVerdict v = gate({rec("planted", Outcome::PASS)}, manifest(), {});
  ASSERT_EQ(v.offending.size(), 1u);
  EXPECT_NE(v.offending[0].why.find("planted bug NOT caught"), std::string::npos) << v.offending[0].why;
  // Where the planted impl derived why the bound may not see its bug, the gate says so: still an
  // offence (an XPASS), but one the bound's derivation accounts for.
  ResultRecord hidden = rec("planted", Outcome::PASS);
  hidden.blind_spot = "the bias check's band reaches 0.005, beyond the 0.0039 slope";
  const GateVerdict w = gate({hidden}, manifest(), {});
  ASSERT_EQ(w.offending.size(), 1u);
  EXPECT_NE(w.offending[0].why.find("in a derived blind spot of its checks: the bias check's band"), std::string::npos)
      << w.offending[0].why;
}

TEST(Gate, AMappedRecordIsJudgedByThisManifestNotTheRunsOne) {
  // An XFAIL from a run whose manifest had the entry; the gate's manifest has none.
  ResultRecord r = rec("none", Outcome::FAIL);
  r.outcome = Outcome::XFAIL;
  const GateVerdict v = gate({r}, manifest(), {r.id});
  ASSERT_FALSE(v.passed());
  EXPECT_EQ(v.offending[0].outcome, Outcome::FAIL);
  // A record that holds only the mapped outcome stands for the failure behind it.
  ResultRecord old = rec("none", Outcome::XFAIL);
  EXPECT_EQ(gate_outcome(old, manifest()), Outcome::FAIL);
  ResultRecord old_pass = rec("strict", Outcome::XPASS);
  EXPECT_EQ(gate_outcome(old_pass, manifest()), Outcome::XPASS);
}

TEST(Gate, PlannedButAbsentIsMissing) {
  const Manifest m = manifest();
  const ResultRecord ok = rec("none", Outcome::PASS);
  const GateVerdict v = gate({ok}, m, {ok.id, "gate.host_x/e_none_lost", "gate.host_x/e_strict_lost"});
  EXPECT_FALSE(v.passed());
  ASSERT_EQ(v.offending.size(), 2u);
  EXPECT_EQ(v.offending[0].id, "gate.host_x/e_none_lost");
  EXPECT_EQ(v.offending[0].outcome, Outcome::MISSING);
  EXPECT_EQ(v.offending[1].outcome, Outcome::MISSING);  // an xfail entry does not excuse a lost case
  EXPECT_EQ(v.counts.at(Outcome::MISSING), 2u);
  EXPECT_EQ(v.counts.at(Outcome::PASS), 1u);
}

TEST(Gate, AnUnplannedResultIsNotedAndStillJudged) {
  const Manifest m = manifest();
  const ResultRecord planned = rec("none", Outcome::PASS);
  const ResultRecord extra_pass = rec("lenient", Outcome::PASS);
  GateVerdict v = gate({planned, extra_pass}, m, {planned.id});
  EXPECT_TRUE(v.passed()) << format_verdict(v, "sm90");
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_EQ(v.notes[0].id, extra_pass.id);
  EXPECT_NE(v.notes[0].why.find("not in the plan"), std::string::npos);
  // A failure is never hidden because the plan did not ask for it.
  const ResultRecord extra_fail = rec("none", Outcome::CRASH);
  v = gate({planned, extra_fail}, m, {planned.id});
  EXPECT_FALSE(v.passed());
  EXPECT_EQ(v.offending.at(0).id, extra_fail.id);
}

TEST(Gate, StaleEntriesArePrintedNotFatal) {
  const Manifest m = manifest();
  const std::vector<ResultRecord> rs = {rec("strict", Outcome::FAIL), rec("lenient", Outcome::FAIL),
                                        rec("flaky", Outcome::PASS)};
  const GateVerdict v = gate(rs, m, {});
  EXPECT_TRUE(v.passed());
  ASSERT_EQ(v.stale.size(), 4u);  // the skip entry, crash, refused and "nothing_matches_this"
  EXPECT_EQ(v.stale[0].kind, EntryKind::skip);
  EXPECT_EQ(v.stale[3].match, "gate.host_x/nothing_matches_this_*");
  const std::string text = format_verdict(v, "sm90");
  EXPECT_NE(text.find("stale manifest entry"), std::string::npos);
  EXPECT_NE(text.find("gate sm90: PASSED"), std::string::npos);
  // With the arch's whole catalog, an entry that matches some case there is not stale.
  std::vector<std::string> catalog = {"gate.host_x/e_skip_PASS", "gate.host_x/nothing_matches_this_1",
                                      "gate.host_x/e_crash_CRASH", "gate.host_x/e_refused_ERROR"};
  for (const auto& r : rs) catalog.push_back(r.id);
  const GateVerdict w = gate(rs, m, {}, catalog);
  EXPECT_TRUE(w.stale.empty());
}

TEST(Gate, EmptyResultsWithAPlanFail) {
  const GateVerdict v = gate({}, manifest(), {"gate.host_x/e_none_a"});
  EXPECT_FALSE(v.passed());
  EXPECT_NE(format_verdict(v, "sm90").find("FAILED"), std::string::npos);
}

// ---- The run as a whole (issue 33): coverage, the selections the reports carry ----

ResultRecord case_of(const std::string& impl, const std::string& problem, Outcome o, const std::string& message = "") {
  ResultRecord r;
  std::string tok = impl;
  for (char& c : tok) c = c == '.' ? '_' : c;
  r.id = "gate." + tok + "/" + problem;
  r.family = "gate";
  r.impl = impl;
  r.arch = "sm90";
  r.tier = "smoke";
  r.outcome = r.raw_outcome = o;
  r.message = message;
  return r;
}

TEST(GateCoverage, FewerCasesRunThanMinRunFail) {
  // Every case SKIP for a capability: nothing is wrong with any case, and nothing was tested.
  const std::vector<ResultRecord> rs = {
      case_of("hip.x", "a", Outcome::SKIP, "arch sm90 lacks capability 'mfma' needed by hip.x")};
  GateVerdict v = gate_as_judged(rs);
  EXPECT_TRUE(v.passed());
  check_coverage(rs, nullptr, 1, v);
  EXPECT_FALSE(v.passed());
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_NE(v.problems[0].find("0 cases ran"), std::string::npos) << v.problems[0];
  GateVerdict w = gate_as_judged(rs);
  check_coverage(rs, nullptr, 0, w);  // --min-run 0: an empty run may pass, on purpose
  EXPECT_TRUE(w.passed()) << format_verdict(w, "sm90");
}

// --require-measured-models: each impl × arch with cases judged under a provisional model fails,
// once, naming the model and the probe; without the flag they pass.
TEST(GateCoverage, RequireMeasuredModelsFailsProvisionalVerdicts) {
  std::vector<ResultRecord> rs = {case_of("cuda.lt", "a", Outcome::PASS), case_of("cuda.lt", "b", Outcome::PASS),
                                  case_of("cuda.lt", "c", Outcome::SKIP, "unsupported"),
                                  case_of("cuda.mx", "a", Outcome::PASS)};
  GateVerdict clean = gate_as_judged(rs);
  check_measured_models(rs, clean);
  EXPECT_TRUE(clean.passed()) << format_verdict(clean, "sm90");
  for (auto& r : rs)
    if (r.impl == "cuda.lt") r.provisional = "d: {bits: 14, rounding: truncate, promote_every: 0} (t.yaml:3)";
  GateVerdict v = gate_as_judged(rs);
  EXPECT_TRUE(v.passed());
  check_measured_models(rs, v);
  ASSERT_EQ(v.problems.size(), 1u) << format_verdict(v, "sm90");
  EXPECT_NE(v.problems[0].find("impl cuda.lt (gate on sm90): 2 cases judged under a provisional accumulator model "
                               "(d: {bits: 14"),
            std::string::npos)
      << v.problems[0];
  EXPECT_NE(v.problems[0].find("opcts probe accumulators --arch sm90"), std::string::npos) << v.problems[0];
}

TEST(GateCoverage, AnImplThatRanNothingIsNotTestedUnlessItsSkipsAreExcused) {
  const std::vector<ResultRecord> rs = {
      case_of("host.a", "p", Outcome::PASS),
      // Built without its backend, or refused by its own supports(): not tested.
      case_of("cuda.b", "p", Outcome::SKIP, "cuda.b: this opcts was built without CUDA"),
      case_of("cuda.c", "p", Outcome::SKIP, "arch sm90 lacks capability 'nvfp4' needed by cuda.c"),
      case_of("cuda.c", "q", Outcome::SKIP, "cuda.c: fp32 only"),
      // Excused: a capability, the manifest, a planted bug only --bitwise, --invariance or
      // --capture shows.
      case_of("cuda.d", "p", Outcome::SKIP, "arch sm90 lacks capability 'nvfp4' needed by cuda.d"),
      case_of("cuda.e", "p", Outcome::SKIP, "manifest skip (sm90.yaml:3): hangs"),
      case_of("cuda.f", "p", Outcome::SKIP,
              "cuda.f: its bug breaks its determinism claim, which only opcts run --bitwise shows"),
      case_of("cuda.g", "p", Outcome::SKIP,
              "cuda.g: its bug breaks its invariance claim, which only opcts run --invariance shows"),
      case_of("cuda.h", "p", Outcome::SKIP,
              "cuda.h: its bug breaks the capture contract (a run recorded, then replayed on fresh inputs), which only "
              "opcts run --capture shows"),
  };
  GateVerdict v = gate_as_judged(rs);
  check_coverage(rs, nullptr, 1, v);
  EXPECT_FALSE(v.passed());
  ASSERT_EQ(v.problems.size(), 2u) << format_verdict(v, "sm90");
  EXPECT_NE(v.problems[0].find("impl cuda.b (gate on sm90) is not tested"), std::string::npos) << v.problems[0];
  EXPECT_NE(v.problems[0].find("built without CUDA"), std::string::npos) << v.problems[0];
  EXPECT_NE(v.problems[1].find("impl cuda.c"), std::string::npos) << v.problems[1];
  EXPECT_NE(v.problems[1].find("1 of its 2 SKIP"), std::string::npos) << v.problems[1];
  // A planted impl (the suite's self-test) that ran nothing is a note: the selection shows its bug nowhere.
  GateVerdict p = gate_as_judged(rs);
  check_coverage(rs, nullptr, 1, p, {"cuda.b", "cuda.c"});
  EXPECT_TRUE(p.passed()) << format_verdict(p, "sm90");
  ASSERT_EQ(p.run_notes.size(), 2u);
  EXPECT_NE(p.run_notes[0].find("planted impl cuda.b (gate on sm90) ran no case"), std::string::npos) << p.run_notes[0];
  // A planted impl whose cases SKIP for a run mode the run left off: the note names the mode.
  GateVerdict g = gate_as_judged(rs);
  check_coverage(rs, nullptr, 1, g, {"cuda.g"});
  ASSERT_EQ(g.run_notes.size(), 1u) << format_verdict(g, "sm90");
  EXPECT_EQ(g.run_notes[0],
            "planted impl cuda.g (gate on sm90) ran no case: 1 of its 1 SKIP because its bug shows only under opcts "
            "run --invariance, which this run left off");
  // With the gate's manifest, its skip entry excuses whatever the record's message says.
  const auto dir = testutil::temp_dir();
  const Manifest m = Manifest::load(testutil::write(dir, "sm90.yaml", R"(arch: sm90
skip:
  - match: "gate.cuda_b/*"
    reason: "not on this machine"
  - match: "gate.cuda_c/*"
    reason: "not on this machine"
)"));
  GateVerdict w = gate(rs, m, {});
  check_coverage(rs, &m, 1, w);
  EXPECT_TRUE(w.passed()) << format_verdict(w, "sm90");
}

TEST(GateCoverage, AsJudgedAFailureUnderAFlakyEntryIsANote) {
  ResultRecord flaky = case_of("host.a", "p", Outcome::FAIL, "mismatch");
  flaky.expectation = "known flaky (sm90.yaml:9): atomics";
  ResultRecord xfail = case_of("host.a", "q", Outcome::XFAIL, "mismatch");
  xfail.raw_outcome = Outcome::FAIL;
  const ResultRecord bad = case_of("host.a", "r", Outcome::FAIL, "mismatch");
  const GateVerdict v = gate_as_judged({flaky, xfail, bad});
  ASSERT_EQ(v.offending.size(), 1u) << format_verdict(v, "sm90");
  EXPECT_EQ(v.offending[0].id, bad.id);
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_EQ(v.notes[0].id, flaky.id);
}

// A selection of `ids` (one shard of `n`, all its ids planned in that shard when n = 1).
RunSelection selection(int shard, int n, const std::vector<std::string>& all, RunState state = RunState::finished) {
  RunSelection s;
  s.state = state;
  s.arch = "sm90";
  s.tier = "smoke";
  s.shard = std::to_string(shard) + "/" + std::to_string(n);
  s.selected = all.size();
  s.selected_digest = ids_digest(all);
  return s;
}

TEST(GateSelections, EveryShardMustHaveAReport) {
  std::vector<ResultRecord> rs;
  std::vector<std::string> ids;
  for (const char* p : {"a", "b", "c", "d"}) {
    rs.push_back(case_of("host.a", p, Outcome::PASS));
    ids.push_back(rs.back().id);
  }
  std::vector<std::pair<RunSelection, std::string>> sels;
  for (int i = 1; i <= 4; ++i) sels.push_back({selection(i, 4, ids), "shard" + std::to_string(i) + ".xml"});
  GateVerdict all;
  check_selections(sels, rs, all);
  EXPECT_TRUE(all.passed()) << format_verdict(all, "sm90");

  // 3 of 4 shards (with the records of the three): the lost one is named.
  auto three = sels;
  three.erase(three.begin() + 2);
  GateVerdict v;
  check_selections(three, {rs[0], rs[1], rs[3]}, v);
  ASSERT_EQ(v.problems.size(), 1u) << format_verdict(v, "sm90");
  EXPECT_NE(v.problems[0].find("shard 3/4 has no report"), std::string::npos) << v.problems[0];

  // A shard that stopped before it planned, with the error its run hit.
  auto started = sels;
  started[1].first.state = RunState::started;
  started[1].first.error = "plugin /x.so: cannot load";
  GateVerdict w;
  check_selections(started, rs, w);
  ASSERT_EQ(w.problems.size(), 1u);
  EXPECT_NE(w.problems[0].find("shard 2/4 (shard2.xml) ended before it planned its cases (plugin /x.so: cannot load)"),
            std::string::npos)
      << w.problems[0];
}

TEST(GateSelections, TheRecordsMustBeThePlan) {
  std::vector<ResultRecord> rs;
  std::vector<std::string> ids;
  for (const char* p : {"a", "b", "c"}) {
    rs.push_back(case_of("host.a", p, Outcome::PASS));
    ids.push_back(rs.back().id);
  }
  const std::vector<std::pair<RunSelection, std::string>> sels = {{selection(1, 1, ids), "r.jsonl"}};
  GateVerdict cut;
  check_selections(sels, {rs[0], rs[1]}, cut);  // a report cut short
  ASSERT_EQ(cut.problems.size(), 1u);
  EXPECT_NE(cut.problems[0].find("hold 2 of its cases where it planned 3"), std::string::npos) << cut.problems[0];
  // Another selection's records (another family) are not this one's.
  ResultRecord other = rs[0];
  other.family = "elsewhere";
  other.id = "elsewhere.host_a/a";
  auto narrowed = sels;
  narrowed[0].first.families = {"gate"};
  std::vector<ResultRecord> with_other = rs;
  with_other.push_back(other);
  GateVerdict ok;
  check_selections(narrowed, with_other, ok);
  EXPECT_TRUE(ok.passed()) << format_verdict(ok, "sm90");
}

TEST(GateSelections, NoSelectionOrAPluginNotUsedFails) {
  GateVerdict none;
  check_selections({}, {case_of("host.a", "a", Outcome::PASS)}, none);
  ASSERT_EQ(none.problems.size(), 1u);
  EXPECT_NE(none.problems[0].find("carry no run selection"), std::string::npos);
  const ResultRecord r = case_of("host.a", "a", Outcome::PASS);
  RunSelection s = selection(1, 1, {r.id});
  s.plugins = {{"/opt/p.so", "", false, "plugin /opt/p.so: cannot load: no such file", {}},
               {"/opt/q.so", "", true, "plugin /opt/q.so: cannot load: no such file", {}}};
  GateVerdict v;
  check_selections({{s, "r.jsonl"}}, {r}, v);
  ASSERT_EQ(v.problems.size(), 1u) << format_verdict(v, "sm90");
  EXPECT_NE(v.problems[0].find("plugin /opt/p.so was not used"), std::string::npos);
  ASSERT_EQ(v.run_notes.size(), 1u);
  EXPECT_NE(v.run_notes[0].find("optional plugin /opt/q.so"), std::string::npos);
}

TEST(GateSelections, TheSelectionRoundTripsThroughItsJson) {
  RunSelection s = selection(2, 3, {"x.y/z"}, RunState::stopped);
  s.families = {"sdpa"};
  s.filters = {"sdpa.*/*fp32*"};
  s.plugins = {{"/p.so", "xxh128:00", true, "why", {"p.one"}}};
  s.manifests = {{"m.yaml", "xxh128:11"}};
  s.error = "e";
  const RunSelection back = RunSelection::parse(s.header_line());
  EXPECT_EQ(back.json(), s.json());
  EXPECT_EQ(back.key(), s.key());
  RunSelection other_shard = s;
  other_shard.shard = "3/3";
  other_shard.state = RunState::finished;
  EXPECT_EQ(other_shard.key(), s.key()) << "the shards of one run share a key";
  RunSelection moved = s;  // a shard run from another folder (or machine) of the same files
  moved.cases_dir = "/elsewhere/cases";
  moved.manifests[0].path = "/elsewhere/m.yaml";
  moved.plugins[0].path = "/elsewhere/p.so";
  EXPECT_EQ(moved.key(), s.key());
  moved.manifests[0].digest = "xxh128:12";
  EXPECT_NE(moved.key(), s.key()) << "another manifest is another run";
  other_shard.filters = {"*"};
  EXPECT_NE(other_shard.key(), s.key());
}

}  // namespace
// Typed xfails name failure kinds: every kind has its own name, which parses back, and no named
// kind follows kLastFailureKind (kAllFailureKinds would leave it out).
TEST(FailureKinds, EveryKindHasItsNameAndNoneFollowsTheLast) {
  std::set<std::string_view> names;
  for (FailureKind k : kAllFailureKinds) {
    EXPECT_NE(to_string(k), "?");
    EXPECT_TRUE(names.insert(to_string(k)).second) << to_string(k);
    EXPECT_EQ(parse_failure_kind(to_string(k)), k);
  }
  EXPECT_EQ(to_string(static_cast<FailureKind>(static_cast<int>(kLastFailureKind) + 1)), "?");
  EXPECT_EQ(parse_failure_kind("stale_capture"), FailureKind::stale_capture);
}

}  // namespace opcts
