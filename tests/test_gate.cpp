// Table tests of the gate: every (outcome × manifest entry) pair, the plan (MISSING, extra ids), stale entries.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/manifest.hpp"
#include "runner/gate.hpp"
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
  Outcome judged;     // the gate's outcome
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
      {{{"O", FailureKind::exceeds_bound, 3, 2.0}, {"lse", FailureKind::exceeds_bound, 1, 1.5}}, "lse exceeds_bound ×1.5 (1 element)"},
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

}  // namespace
}  // namespace opcts
