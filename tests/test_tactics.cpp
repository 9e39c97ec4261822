// Tactics as a case dimension (Impl::tactics): each tactic of a problem is a case of its own,
// "<case id>/<tactic>", run with RunContext::tactic; the first runs with its problem, one more at
// the default tier (rotating over the problems), all at full; a plugin lists them through
// list_tactics (ABI 1.11), asked in a probe; a wrong tactic FAILs on its own, a manifest entry
// can expect it, and a tactic the machine lacks is a SKIP.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/abi_impl.hpp"
#include "core/arch.hpp"
#include "core/result.hpp"
#include "runner/catalog.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::sh;

const std::string kOpcts = OPCTS_BINARY;
std::string bad(const char* name) { return std::string(OPCTS_BAD_PLUGIN_DIR) + "/" + name + ".so"; }

TEST(Tactics, NamesAndIdsSplitIntoTheirParts) {
  for (const char* good : {"h0", "split_k4", "k_two_halves", "a"}) EXPECT_TRUE(is_tactic_name(good)) << good;
  for (const char* no : {"", "0h", "H0", "split-k", "a/b", "a.b", "abcdefghijklmnopqrstuvwxyz0123456"})
    EXPECT_FALSE(is_tactic_name(no)) << no;
  const CaseIdParts with = split_case_id("scaled_mm.cuda_cublaslt/tensorwise_x/h3");
  EXPECT_EQ(with.family, "scaled_mm");
  EXPECT_EQ(with.impl_token, "cuda_cublaslt");
  EXPECT_EQ(with.problem_id, "tensorwise_x");
  EXPECT_EQ(with.tactic, "h3");
  const CaseIdParts without = split_case_id("cast.host_cvt/x");
  EXPECT_EQ(without.problem_id, "x");
  EXPECT_EQ(without.tactic, "");
  EXPECT_THROW(split_case_id("no_slash"), std::invalid_argument);
}

// The first tactic runs with its problem; of the others exactly one joins at the default tier, and
// which one rotates with the problem id, so that a catalog's problems cover every tactic there.
TEST(Tactics, TheFirstRunsWithItsProblemOneMoreAtDefaultTheRestAtFull) {
  for (const Tier problem : {Tier::smoke, Tier::default_, Tier::full}) {
    std::set<size_t> rotated;
    for (int i = 0; i < 64; ++i) {
      const std::string id = "problem" + std::to_string(i);
      EXPECT_EQ(tactic_tier(problem, 0, 4, id), problem);
      int at_default = 0;
      for (size_t t = 1; t < 4; ++t) {
        const Tier tier = tactic_tier(problem, t, 4, id);
        EXPECT_GE(tier, problem);
        if (tier <= Tier::default_) {
          ++at_default;
          rotated.insert(t);
        } else {
          EXPECT_EQ(tier, Tier::full);
        }
      }
      EXPECT_EQ(at_default, problem == Tier::full ? 0 : 1) << id;
    }
    if (problem != Tier::full) EXPECT_EQ(rotated, (std::set<size_t>{1, 2, 3})) << "the second tactic rotates";
  }
}

// host.emulated_split_k lists split_k1, 2 and 4 where K has the units for them: every valid
// problem's cases carry a tactic, split_k1 at the problem's own tier, and an id parses back to
// its tactic; a negative problem (refused before any split) has one case without.
TEST(Tactics, ABuiltInImplsTacticsAreCasesOfTheirOwn) {
  const auto archs = ArchTable::load((testutil::cases_dir() / "archs.yaml").string());
  const auto entries = load_catalogs(builtin_registry(), {(testutil::cases_dir() / "scaled_mm.yaml").string()});
  std::map<std::string, std::vector<const Case*>> by_problem;
  const auto cases = make_cases(builtin_registry(), entries, archs.get("host"), false);
  for (const Case& c : cases)
    if (c.impl->name() == "host.emulated_split_k")
      by_problem[std::string(split_case_id(c.id).problem_id)].push_back(&c);
  ASSERT_GT(by_problem.size(), 50u);
  int split4 = 0;
  std::string id;  // a case with a tactic
  for (const auto& [problem, tactics] : by_problem) {
    for (const Case* c : tactics) {
      if (c->tactic.empty()) {
        EXPECT_NE(c->family->expected_error(*c->problem), "") << c->id;
        EXPECT_EQ(tactics.size(), 1u) << c->id;
        continue;
      }
      id = c->id;
      EXPECT_EQ(c->id, c->id.substr(0, c->id.rfind('/')) + "/" + c->tactic);
      if (c->tactic == "split_k1") EXPECT_EQ(c->tier, tactics.front()->tier) << c->id;
      split4 += c->tactic == "split_k4";
      const Case back = case_from_id(builtin_registry(), c->id);
      EXPECT_EQ(back.tactic, c->tactic);
    }
  }
  EXPECT_GT(split4, 0);
  // An id must name one of the impl's tactics for its problem, and only an impl with tactics takes one.
  ASSERT_NE(id, "");
  const std::string bare = id.substr(0, id.rfind('/'));
  const auto refused = [](const std::string& bad_id) {
    try {
      case_from_id(builtin_registry(), bad_id);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused(bare).find("no tactic, but host.emulated_split_k runs this problem with the tactics split_k1"),
            std::string::npos)
      << refused(bare);
  EXPECT_NE(refused(bare + "/split_k3").find("tactic 'split_k3'"), std::string::npos) << refused(bare + "/split_k3");
  const std::string plain = "scaled_mm.host_emulated/" + std::string(split_case_id(id).problem_id);
  EXPECT_NO_THROW(case_from_id(builtin_registry(), plain));
  EXPECT_NE(refused(plain + "/split_k1").find("with no tactics"), std::string::npos) << refused(plain + "/split_k1");
}

// The right split-K tactics pass; the planted one, which drops K's remainder, FAILs on every
// tactic it lists (each leaves a remainder), as an implied strict xfail: the gate passes.
TEST(Tactics, EveryRightTacticPassesAndThePlantedTacticIsCaught) {
  const std::string dir = testutil::temp_dir();
  const auto r =
      sh(kOpcts + " run --arch host --tier smoke --include-planted --filter 'scaled_mm.host_emulated_split_k*'" +
         " --exclude 'scaled_mm.host_emulated_split_k_count_variant/*' --results " + dir + "/r.jsonl");
  EXPECT_EQ(r.status, 0) << r.output;
  int right = 0, caught = 0;
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    const bool planted = rec.impl == "host.emulated_split_k_drops_tail";
    if (rec.outcome == Outcome::SKIP) {
      EXPECT_TRUE(planted) << rec.id << ": " << rec.message;
      continue;
    }
    if (planted) {
      EXPECT_EQ(rec.outcome, Outcome::XFAIL) << rec.id << ": " << rec.message;
      EXPECT_NE(split_case_id(rec.id).tactic, "") << rec.id;
      caught += rec.outcome == Outcome::XFAIL;
    } else {
      EXPECT_EQ(rec.outcome, Outcome::PASS) << rec.id << ": " << rec.message;
      right += rec.outcome == Outcome::PASS;
    }
  }
  EXPECT_GT(right, 50) << r.output;
  EXPECT_GT(caught, 10) << r.output;
}

// Each tactic is judged under the accumulator model declared for it: a manifest tolerance entry
// whose glob names one tactic ("…/split_k4") judges that tactic's cases alone — the rule each
// output records says so — while the problem's other tactics keep the tolerance table's.
TEST(Tactics, AToleranceEntryCanDeclareOneTacticsAccumulatorModel) {
  const std::string dir = testutil::temp_dir();
  const std::string manifest = testutil::write(dir, "host.yaml",
                                               "arch: host\n"
                                               "tolerance:\n"
                                               "  - match: 'scaled_mm.host_emulated_split_k/*/split_k4'\n"
                                               "    accumulator: {bits: 24, rounding: rne, promote_every: 0}\n"
                                               "    reason: four slices, each an fp32 sum\n");
  const std::string problem =
      "scaled_mm.host_emulated_split_k/blockwise_1x128_128x128_e4m3fn_e4m3fn_tn_m128_n256_k512_"
      "out_bf16_random";
  const auto r = sh(kOpcts + " run --arch host --tier full --manifest " + manifest + " --filter '" + problem +
                    "/*' --results " + dir + "/r.jsonl");
  EXPECT_EQ(r.status, 0) << r.output;
  std::map<std::string, std::string> rule;
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    EXPECT_EQ(rec.outcome, Outcome::PASS) << rec.id << ": " << rec.message;
    ASSERT_FALSE(rec.outputs.empty()) << rec.id;
    rule[std::string(split_case_id(rec.id).tactic)] = rec.outputs[0].rule;
  }
  ASSERT_EQ(rule.size(), 3u) << r.output;
  EXPECT_NE(rule["split_k4"].find("host.yaml:"), std::string::npos) << rule["split_k4"];
  EXPECT_EQ(rule["split_k1"].find("host.yaml:"), std::string::npos) << rule["split_k1"];
  EXPECT_EQ(rule["split_k2"].find("host.yaml:"), std::string::npos) << rule["split_k2"];
}

// A plugin's list_tactics (ABI 1.11), asked in a probe: the example's scaled_mm lists k_one_pass
// and, for K of 2 or more, k_two_halves — at the smoke tier the first only, at full both — and
// both pass.
TEST(Tactics, APluginListsItsTacticsAndEachRuns) {
  const std::string filter = " --plugin " + std::string(OPCTS_EXAMPLE_PLUGIN) + " --filter 'scaled_mm.example_*'";
  const auto smoke = sh(kOpcts + " list --arch host --tier smoke" + filter);
  const auto full = sh(kOpcts + " list --arch host --tier full" + filter);
  ASSERT_EQ(smoke.status, 0) << smoke.output;
  EXPECT_NE(smoke.output.find("/k_one_pass\n"), std::string::npos) << smoke.output;
  EXPECT_EQ(smoke.output.find("/k_two_halves\n"), std::string::npos) << smoke.output;
  EXPECT_NE(full.output.find("/k_two_halves\n"), std::string::npos) << full.output;
  const std::string dir = testutil::temp_dir();
  // K < 100 only: the example's scalar loop takes minutes over the default tier.
  const auto run = sh(kOpcts + " run --arch host --tier default" + filter + " --exclude '*_k[0-9][0-9][0-9]*'" +
                      " --results " + dir + "/r.jsonl");
  EXPECT_EQ(run.status, 0) << run.output;
  int halves = 0;
  for (const ResultRecord& rec : read_results_file(dir + "/r.jsonl")) {
    EXPECT_TRUE(rec.outcome == Outcome::PASS || rec.outcome == Outcome::SKIP) << rec.id << ": " << rec.message;
    halves += rec.outcome == Outcome::PASS && split_case_id(rec.id).tactic == "k_two_halves";
  }
  EXPECT_GT(halves, 3) << run.output;
}

// The tactic reaches run: of tests/plugins/bad_plugin.c's three (variant 12), "forwards" passes,
// "drops_last" loses an update and FAILs alone — until a manifest entry expects that one tactic's
// failure — and "absent" is a SKIP quoting the plugin. A list with a name that is not a tactic
// name makes the impl's case an ERROR naming it (variant 13).
TEST(Tactics, AWrongTacticFailsAloneAManifestCanExpectItAndAnAbsentOneSkips) {
  const std::string dir = testutil::temp_dir();
  const std::string problem = "scatter_add.bad_tactics/fp32_i64_n37_m301_uniform";
  const auto run = [&](const std::string& extra) {
    sh(kOpcts + " run --arch host --tier full --plugin " + bad("tactics") + " --filter '" + problem + "/*' --results " +
       dir + "/r.jsonl" + extra);
    std::map<std::string, ResultRecord> by_tactic;
    for (ResultRecord& rec : read_results_file(dir + "/r.jsonl"))
      by_tactic[std::string(split_case_id(rec.id).tactic)] = std::move(rec);
    return by_tactic;
  };
  auto plain = run("");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain["forwards"].outcome, Outcome::PASS) << plain["forwards"].message;
  EXPECT_EQ(plain["drops_last"].outcome, Outcome::FAIL) << plain["drops_last"].message;
  EXPECT_EQ(plain["absent"].outcome, Outcome::SKIP);
  EXPECT_NE(plain["absent"].message.find("tactic absent not offered here"), std::string::npos)
      << plain["absent"].message;
  EXPECT_NE(plain["absent"].message.find("this machine offers no such tactic"), std::string::npos);
  const std::string& absent = plain["absent"].message;  // "<impl>: tactic absent ...", the impl named once
  EXPECT_EQ(absent.find(absent.substr(0, absent.find(": tactic ") + 2), 1), std::string::npos) << absent;
  const std::string manifest = testutil::write(dir, "host.yaml",
                                               "arch: host\n"
                                               "xfail:\n"
                                               "  - match: 'scatter_add.bad_tactics/*/drops_last'\n"
                                               "    reason: its split loses the last update\n"
                                               "    tracking: issue 39\n"
                                               "    expect: FAIL\n"
                                               "    outputs: {out: [exceeds_bound, not_conserved]}\n");
  auto expected = run(" --manifest " + manifest);
  EXPECT_EQ(expected["drops_last"].outcome, Outcome::XFAIL) << expected["drops_last"].message;
  EXPECT_EQ(expected["forwards"].outcome, Outcome::PASS) << "the entry takes that tactic only";

  const auto names = sh(kOpcts + " run --arch host --tier full --plugin " + bad("tactic_names") +
                        " --filter scatter_add.bad_tactics/fp32_i64_n37_m301_uniform --results " + dir + "/n.jsonl");
  const auto records = read_results_file(dir + "/n.jsonl");
  ASSERT_EQ(records.size(), 1u) << names.output;
  EXPECT_EQ(records[0].outcome, Outcome::ERROR);
  EXPECT_NE(records[0].message.find("'Not-A-Name' is not a tactic name"), std::string::npos) << records[0].message;
}

// A built-in impl's tactics are checked as a plugin's are (AbiImpl::tactics): a name that is not a
// tactic name, or one listed twice (two cases of one id), stops the suite's planning, naming both.
class ListsTactics final : public Impl {
 public:
  ListsTactics(const char* name, std::vector<std::string> tactics) : name_(name), tactics_(std::move(tactics)) {}
  std::string_view family() const override { return "cast"; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  std::vector<std::string> tactics(const Problem&) const override { return tactics_; }
  TensorMap run(const Problem&, const TensorMap&, const RunContext&) const override { return {}; }

 private:
  std::string name_;
  std::vector<std::string> tactics_;
};

TEST(Tactics, ABuiltInImplsMalformedOrRepeatedTacticStopsThePlan) {
  const auto archs = ArchTable::load((testutil::cases_dir() / "archs.yaml").string());
  const auto planned = [&](std::vector<std::string> tactics) -> std::string {
    Registry reg;
    register_builtins(reg);
    reg.add(std::make_unique<ListsTactics>("host.test_tactics", std::move(tactics)));
    const auto entries = load_catalogs(reg, {(testutil::cases_dir() / "cast.yaml").string()});
    try {
      return std::to_string(make_cases(reg, entries, archs.get("host"), false).size()) + " cases";
    } catch (const std::logic_error& e) {
      return e.what();
    }
  };
  EXPECT_NE(planned({"a", "b"}).find(" cases"), std::string::npos) << planned({"a", "b"});
  EXPECT_NE(planned({"a", "B"}).find("host.test_tactics: tactic 'B' of "), std::string::npos) << planned({"a", "B"});
  EXPECT_NE(planned({"a", "b", "a"}).find("tactic 'a' of "), std::string::npos);
  EXPECT_NE(planned({"a", "b", "a"}).find(" listed twice"), std::string::npos) << planned({"a", "b", "a"});
}

// A plugin's list_tactics that fails may say why in `names` (plugin.h): the error quotes it.
int32_t no_tactics_here(const void*, const void*, char* names, size_t size) {
  std::snprintf(names, size, "no algorithm for this shape");
  return -1;
}
int32_t no_tactics_said(const void*, const void*, char* names, size_t) {
  names[0] = '\0';
  return -2;
}

TEST(Tactics, APluginsFailedListQuotesTheReasonItWrote) {
  const Family& f = *builtin_registry().family("cast");
  const ProblemPtr p = f.parse_id("e4m3fn_to_fp32_allcodes");
  const auto error_of = [&](opcts_list_tactics_fn list) -> std::string {
    opcts_impl_desc d{};
    d.struct_size = sizeof d;
    d.family = "cast", d.name = "test.lists", d.backend = "host", d.abi_minor = 11;
    d.list_tactics = list;
    Registry reg;  // the impl finds its family through the registry it joins
    register_builtins(reg);
    reg.add(std::make_unique<AbiImpl>(d, nullptr));
    try {
      reg.impl("test.lists")->tactics(*p);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(no_tactics_here),
            "test.lists: list_tactics on e4m3fn_to_fp32_allcodes: returned -1 (an error): no algorithm for this shape");
  EXPECT_EQ(error_of(no_tactics_said), "test.lists: list_tactics on e4m3fn_to_fp32_allcodes: returned -2 (an error)");
}

}  // namespace
}  // namespace opcts
