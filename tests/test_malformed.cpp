// The malformed-input corpus (tests/data/malformed/): every variant is refused, each with the
// file, line and column its index names and a message saying what is wrong; none is accepted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "core/arch.hpp"
#include "core/yaml_util.hpp"
#include "judge/manifest.hpp"
#include "runner/catalog.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(OPCTS_SOURCE_DIR) / "tests" / "data" / "malformed";

struct Variant {
  std::string input;  // relative to kCorpus; its first folder names the loader
  std::string at;     // relative file:line:column of the error
  std::string message;
};

std::vector<Variant> index() {
  std::ifstream in(kCorpus / "index.tsv");
  std::vector<Variant> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Variant v;
    std::getline(fields, v.input, '\t');
    std::getline(fields, v.at, '\t');
    std::getline(fields, v.message);
    out.push_back(v);
  }
  return out;
}

// A cases folder with the real archs.yaml and tolerances.yaml, one of them replaced by `file`.
std::string cases_with(const std::string& table, const fs::path& file) {
  const std::string dir = testutil::temp_dir();
  for (const char* name : {"archs.yaml", "tolerances.yaml"})
    fs::copy_file(name == table ? file : testutil::cases_dir() / name, fs::path(dir) / name);
  return dir;
}

// Loads a variant with the loader of its folder; returns the error and sets `shown_as` to the
// path the error names for the variant's own file.
std::string error_of(const Variant& v, std::string& shown_as) {
  const fs::path file = kCorpus / v.input;
  const std::string kind = v.input.substr(0, v.input.find('/'));
  shown_as = (kCorpus / v.at.substr(0, v.at.find(':'))).string();
  try {
    if (kind == "catalog") {
      load_catalogs(builtin_registry(), {file.string()});
    } else if (kind == "manifest") {
      Manifest::load(file.string());
    } else if (kind == "tolerances" || kind == "archs") {
      const std::string table = kind + ".yaml";
      const std::string dir = cases_with(table, file);
      shown_as = (fs::path(dir) / table).string();
      SuiteOptions o{dir, {}, "host", ""};
      o.load_catalogs = false;
      Suite suite(builtin_registry(), o);
    } else if (kind == "rules") {
      // A tolerances.yaml judged against the real catalogs: its rules must name real outputs.
      const std::string dir = cases_with("tolerances.yaml", file);
      for (const auto& e : fs::directory_iterator(testutil::cases_dir()))
        if (e.is_regular_file() && e.path().extension() == ".yaml" && !fs::exists(fs::path(dir) / e.path().filename()))
          fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
      shown_as = (fs::path(dir) / "tolerances.yaml").string();
      Suite suite(builtin_registry(), SuiteOptions{dir, {}, "host", ""});
    } else if (kind == "suite_manifest") {
      // A manifest judged against the real catalogs of its arch (host).
      Suite suite(builtin_registry(), SuiteOptions{testutil::cases_dir().string(), {}, "host", file.string()});
    } else {
      return "unknown corpus folder '" + kind + "'";
    }
  } catch (const YamlError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a YamlError: ") + e.what();
  }
  return "";
}

TEST(Malformed, EveryVariantNamesFileLineAndColumn) {
  const auto variants = index();
  EXPECT_GE(variants.size(), 80u);
  for (const auto& v : variants) {
    std::string shown_as;
    const std::string err = error_of(v, shown_as);
    SCOPED_TRACE(v.input);
    ASSERT_FALSE(err.empty()) << "accepted silently";
    const std::string position = v.at.substr(v.at.find(':'));  // ":line:column"
    EXPECT_EQ(err.rfind(shown_as + position + ": ", 0), 0u) << "want " << shown_as + position << "\ngot  " << err;
    EXPECT_NE(err.find(v.message), std::string::npos) << "want '" << v.message << "' in\n" << err;
  }
}

// Each file or folder of the corpus is a variant of the index, and each variant exists.
TEST(Malformed, IndexCoversTheCorpus) {
  std::set<std::string> listed, present;
  for (const auto& v : index()) listed.insert(v.input);
  for (const auto& kind : fs::directory_iterator(kCorpus)) {
    if (!kind.is_directory()) continue;
    for (const auto& e : fs::directory_iterator(kind.path()))
      present.insert(kind.path().filename().string() + "/" + e.path().filename().string());
  }
  EXPECT_EQ(listed, present);
}

// The corpus's loaders accept the real files, so a refusal above is the variant's own fault.
TEST(Malformed, TheRealFilesLoad) {
  EXPECT_NO_THROW(load_catalogs(builtin_registry(), {testutil::cases_dir().string()}));
  for (const auto& m : fs::directory_iterator(testutil::cases_dir() / "manifests"))
    EXPECT_NO_THROW(Manifest::load(m.path().string())) << m.path();
  SuiteOptions o{testutil::cases_dir().string(), {}, "host", ""};
  EXPECT_NO_THROW(Suite(builtin_registry(), o));
}

}  // namespace
}  // namespace opcts
