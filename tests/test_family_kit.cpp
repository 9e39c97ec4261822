// The family kit (core/fields.hpp): tokens, the id reader, the derived parsers, the round trip of
// every family's every catalog problem, and the stable case ids of every arch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "app/builtins.hpp"
#include "core/fields.hpp"
#include "core/kit_family.hpp"
#include "runner/catalog.hpp"
#include "runner/suite.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;

TEST(KitTokens, NumbersRoundTripAndStayGtestNames) {
  for (double x : {0.0, 1.0, 0.5, 0.0625, 4.0, 30.0, -30.0, 0.1, 1e20, -1e-20, 0.3})
    EXPECT_EQ(kit::parse_num_token(kit::num_token(x)), x) << kit::num_token(x);
  EXPECT_EQ(kit::num_token(0.0625), "0p0625");
  EXPECT_EQ(kit::num_token(-30), "m30");
  EXPECT_EQ(kit::num_token(1e20), "1e20");  // no '+': ids are [a-z0-9_]
  for (const char* bad : {"", "p", "1x", "1.5", "-1"})
    EXPECT_THROW(kit::parse_num_token(bad), std::invalid_argument) << bad;
  EXPECT_EQ(kit::int_token(-1), "m1");
  EXPECT_EQ(kit::parse_int_token("m4095"), -4095);
  for (const char* bad : {"", "m", "-5", "+5", "5a", "mm5"})
    EXPECT_THROW(kit::parse_int_token(bad), std::invalid_argument) << bad;
}

TEST(KitIdReader, TakesSequencesAndPrefixes) {
  kit::IdReader in("causal_lr_win4095xm1_expect_b_scale");
  EXPECT_FALSE(in.take_seq("causal_ul"));
  EXPECT_EQ(in.position(), 0u);
  EXPECT_TRUE(in.take_seq("causal_lr"));
  EXPECT_FALSE(in.take_prefixed("win4095xm1x").has_value());
  EXPECT_EQ(in.take_prefixed("win").value(), "4095xm1");
  EXPECT_FALSE(in.take_prefixed("expect").has_value());  // a prefix needs something after it
  EXPECT_TRUE(in.take_seq("expect"));
  EXPECT_EQ(in.take_rest(), "b_scale");
  EXPECT_TRUE(in.done());
  EXPECT_THROW(in.take("a dtype"), std::invalid_argument);
}

// A toy problem: the builders alone, with their defaults and optional tokens.
enum class Shade { light, dark, dark_blue };
struct Toy {
  DType dtype = DType::fp32;
  int64_t n = 1;
  int64_t pad = 0;
  Shade shade = Shade::light;
  bool fast = false;
  bool operator==(const Toy&) const = default;
};

const kit::FieldTable<Toy>& toy_fields() {
  static const kit::FieldTable<Toy> t(
      "toy",
      {kit::dtype_bare<Toy>("dtype", &Toy::dtype, "fp32 | bf16"), kit::int_always<Toy>("n", &Toy::n, "n", "N", true),
       kit::int_unless<Toy, int64_t>("pad", &Toy::pad, 0, "pad", "P"),
       kit::choice<Toy>(
           "shade", &Toy::shade,
           {{Shade::light, "light", ""}, {Shade::dark, "dark", "dark"}, {Shade::dark_blue, "dark_blue", "dark_blue"}}),
       kit::flag<Toy>("fast", &Toy::fast, "fast")},
      [](const Toy& p) {
        if (p.n < 0) throw std::invalid_argument("n must be >= 0");
      });
  return t;
}

TEST(KitTable, DerivesParserPrinterAndErrors) {
  const auto& t = toy_fields();
  const Toy p = t.parse_yaml(YAML::Load("{dtype: bf16, n: 3, shade: dark_blue, fast: true}"));
  EXPECT_EQ(p, (Toy{.dtype = DType::bf16, .n = 3, .shade = Shade::dark_blue, .fast = true}));
  EXPECT_EQ(t.id(p), "bf16_n3_dark_blue_fast");  // the longest choice, not "dark" + a stray "blue"
  EXPECT_EQ(t.parse_id("bf16_n3_dark_blue_fast"), p);
  EXPECT_EQ(t.id(Toy{}), "fp32_n1");  // defaults leave their optional tokens out
  EXPECT_EQ(t.parse_id("fp32_n1_pad8"), (Toy{.pad = 8}));

  auto yaml_error = [&](const char* y) {
    try {
      t.parse_yaml(YAML::Load(y));
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(yaml_error("{dtype: fp32, n: 1, colour: red}")
                .find("unknown toy field 'colour' (expected dtype, n, pad, shade, fast)"),
            std::string::npos);
  EXPECT_NE(yaml_error("{dtype: fp32}").find("missing field 'n'"), std::string::npos);
  EXPECT_NE(yaml_error("{dtype: fp32, n: x}").find("field 'n': cannot read 'x' as an integer"), std::string::npos);
  EXPECT_NE(yaml_error("{dtype: fp32, n: 1, shade: red}").find("field 'shade': unknown value 'red'"),
            std::string::npos);
  EXPECT_NE(yaml_error("{dtype: fp32, n: -1}").find("n must be >= 0"), std::string::npos);

  testutil::expect_invalid([&](const std::string& id) { t.parse_id(id); },
                           {
                               {"fp32_n1_purple", "unexpected token 'purple'"},
                               {"fp32_x1", "expected nN"},
                               {"fp32_n01", "is not canonical: the problem's id is 'fp32_n1'"},
                               {"fp32_n1_pad0", "not canonical"},  // a default spelled out
                           });
  EXPECT_NE(t.describe().find("shade: light | dark | dark_blue; id [dark|dark_blue]"), std::string::npos);
}

// Every problem of every family's catalogs (all tiers) survives id → problem → id unchanged,
// and parsing its id gives back the very problem the catalog's YAML gave.
TEST(KitRoundTrip, EveryCatalogProblemOfEveryFamily) {
  const Registry& reg = builtin_registry();
  const auto entries = load_catalogs(reg, {testutil::cases_dir().string()});
  std::set<std::string> families;
  for (const auto& e : entries) {
    const std::string id = e.family->problem_id(*e.problem);
    ASSERT_EQ(id, e.problem_id);
    const ProblemPtr back = e.family->parse_id(id);
    EXPECT_TRUE(e.family->equal(*e.problem, *back)) << e.family->name() << " " << id << " (" << e.source << ")";
    EXPECT_EQ(e.family->problem_id(*back), id);
    families.insert(std::string(e.family->name()));
  }
  for (const Family* f : reg.families())
    EXPECT_TRUE(families.count(std::string(f->name()))) << f->name() << " has no catalog problem";
}

// The opt-in catalogs (cases/opt_in/, loaded only with --catalog) round-trip as the built-in ones,
// and PyTorch's SDPA sweep keeps all its points: 2 dtypes x 2 batches x 64 (seq_q, seq_k) x 12
// head dims x 2 masks x 2 directions = 12,288 distinct problems (a dropped axis value shows here).
TEST(KitRoundTrip, TheOptInCatalogsAndThePyTorchGridsSize) {
  const Registry& reg = builtin_registry();
  const auto entries = load_catalogs(reg, {(testutil::cases_dir() / "opt_in").string()});
  std::set<std::string> grid;
  for (const auto& e : entries) {
    const std::string id = e.family->problem_id(*e.problem);
    ASSERT_EQ(id, e.problem_id);
    EXPECT_TRUE(e.family->equal(*e.problem, *e.family->parse_id(id))) << id << " (" << e.source << ")";
    if (e.source.find("pytorch_grid.yaml") != std::string::npos) grid.insert(id);
  }
  EXPECT_EQ(grid.size(), 12288u);
}

// The ids recorded in one tests/data/case_ids file: its literal ids ("family.impl/problem") and
// every "impl NAME" line with every problem line (the form regenerate.sh writes where a family's
// ids are that cross product); "family.impl/problem t1 t2" lines, the id with each tactic after it
// (an impl with tactics); '#' lines are comments.
std::vector<std::string> recorded_ids(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> ids, impls, problems;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("impl ", 0) == 0) impls.push_back(line.substr(5));
    else if (const auto space = line.find(' '); space != std::string::npos) {
      std::istringstream tactics(line.substr(space + 1));
      for (std::string t; tactics >> t;) ids.push_back(line.substr(0, space) + "/" + t);
    } else if (line.find('/') != std::string::npos) ids.push_back(line);
    else problems.push_back(line);
  }
  for (const std::string& impl : impls)
    for (const std::string& problem : problems) ids.push_back(impl + "/" + problem);
  return ids;
}

TEST(CaseIds, TheRecordedFormExpandsImplsTimesProblems) {
  const fs::path file = fs::temp_directory_path() / "opcts_case_ids_form.txt";
  std::ofstream(file) << "# comment\nimpl f.a\nimpl f.b\np1\np2\nf.c/p9\nf.d/p1 t1 t2\n";
  std::vector<std::string> ids = recorded_ids(file);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids,
            (std::vector<std::string>{"f.a/p1", "f.a/p2", "f.b/p1", "f.b/p2", "f.c/p9", "f.d/p1/t1", "f.d/p1/t2"}));
  fs::remove(file);
}

// The case ids of every arch at the full tier, planted impls included, are the ones recorded in
// tests/data/case_ids/<backend>/<family>.txt: ids are the suite's contract with its users
// (manifests, CI filters, tracked failures), so a change to them must be deliberate, and a
// family's change rewrites only its own file. Regenerate them with
// tests/data/case_ids/regenerate.sh (host from arch host, cuda from sm90, hip from gfx942). The
// ids do not depend on the build: a host build lists the CUDA impls (as SKIP) too.
TEST(CaseIds, EveryArchListsTheRecordedIds) {
  const ArchTable archs = ArchTable::load((testutil::cases_dir() / "archs.yaml").string());
  const auto entries = load_catalogs(builtin_registry(), {testutil::cases_dir().string()});
  for (const std::string& arch : archs.names()) {
    std::map<std::string, std::vector<std::string>> got, want;  // family → ids
    for (const auto& c : make_cases(builtin_registry(), entries, archs.get(arch), true))
      got[c.id.substr(0, c.id.find('.'))].push_back(c.id);
    const fs::path dir = fs::path(OPCTS_SOURCE_DIR) / "tests/data/case_ids" / archs.get(arch).backend;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().extension() == ".txt") want[f.path().stem().string()] = recorded_ids(f.path());
    std::set<std::string> families;
    for (const auto& [family, ids] : got) families.insert(family);
    for (const auto& [family, ids] : want) families.insert(family);
    for (const std::string& family : families) {
      std::vector<std::string> g = got[family], w = want[family], gone, added;
      std::sort(g.begin(), g.end());
      std::sort(w.begin(), w.end());
      std::set_difference(w.begin(), w.end(), g.begin(), g.end(), std::back_inserter(gone));
      std::set_difference(g.begin(), g.end(), w.begin(), w.end(), std::back_inserter(added));
      EXPECT_TRUE(gone.empty() && added.empty())
          << arch << ", " << family << ": " << gone.size()
          << " recorded ids gone (first: " << (gone.empty() ? "" : gone.front()) << "), " << added.size()
          << " new (first: " << (added.empty() ? "" : added.front()) << ") against " << (dir / (family + ".txt"));
    }
  }
}

}  // namespace
}  // namespace opcts
