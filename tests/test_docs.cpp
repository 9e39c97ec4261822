// The README and docs/ stay true: the README's size and first two commands, every link between
// the pages, every catalog key the field tables know, every CLI option --help lists, and the
// plugin example built and run as docs/plugins.md says.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "judge/manifest.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::read_file;
using testutil::sh;
using testutil::Shell;

const fs::path kSource = OPCTS_SOURCE_DIR;

// README.md and every page of docs/ (not docs/status/, the GPU runs' records).
std::vector<fs::path> pages() {
  std::vector<fs::path> out{kSource / "README.md"};
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") out.push_back(e.path());
  return out;
}

std::set<std::string> anchors(const fs::path& page) {
  std::set<std::string> out;
  std::istringstream in(read_file(page));
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (!fenced && line.rfind("#", 0) == 0) out.insert(heading_anchor(line.substr(line.find_first_not_of('#') + 1)));
  }
  return out;
}

// Pages other branches add (tests/data/docs_links_pending.txt): a link to one may dangle until
// it lands, and once it exists its line must go, so nothing dangles for long.
std::set<std::string> pending() {
  std::set<std::string> out;
  std::istringstream in(read_file(kSource / "tests/data/docs_links_pending.txt"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.insert(line.substr(0, line.find(' ')));
  return out;
}

TEST(Readme, IsShortAndStartsWithTheTwoCommands) {
  const std::string readme = read_file(kSource / "README.md");
  EXPECT_LE(readme.size(), 12000u);
  const auto fence = readme.find("```sh\n");
  ASSERT_NE(fence, std::string::npos);
  std::istringstream block(readme.substr(fence + 6, readme.find("```", fence + 6) - fence - 6));
  std::string first, second;
  std::getline(block, first);
  std::getline(block, second);
  EXPECT_EQ(first.rfind("scripts/run-suite.sh ", 0), 0u) << first;
  EXPECT_EQ(second.rfind("scripts/run-tests.sh ", 0), 0u) << second;
}

// Every relative link of every page names a file or folder that exists, and an anchor a heading
// of the page it points to; web links are left to the reader.
TEST(Docs, EveryLinkIsValid) {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  const auto waiting = pending();
  size_t links = 0;
  for (const fs::path& page : pages()) {
    const std::string text = read_file(page);
    for (std::sregex_iterator it(text.begin(), text.end(), link), end; it != end; ++it) {
      const std::string target = (*it)[1];
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 || target.rfind("mailto:", 0) == 0)
        continue;
      ++links;
      const std::string file = target.substr(0, target.find('#'));
      const std::string anchor = target.find('#') == std::string::npos ? "" : target.substr(target.find('#') + 1);
      const fs::path resolved = file.empty() ? page : (page.parent_path() / file).lexically_normal();
      const std::string rel = fs::relative(resolved, kSource).string();
      if (!fs::exists(resolved)) {
        EXPECT_TRUE(waiting.count(rel)) << page.filename() << ": link to " << target << " (" << rel
                                        << ") names nothing";
        continue;
      }
      if (!anchor.empty())
        EXPECT_TRUE(anchors(resolved).count(anchor)) << page.filename() << ": no heading #" << anchor << " in " << rel;
    }
  }
  EXPECT_GE(links, 30u);
  for (const auto& p : waiting)
    EXPECT_FALSE(fs::exists(kSource / p)) << p << " exists now: remove it from tests/data/docs_links_pending.txt";
}

// docs/catalog.md documents every key `opcts list --fields all` prints, in its family's section,
// and every structural key of a catalog file.
TEST(Docs, TheCatalogReferenceHasEveryKey) {
  const Shell fields = sh(std::string(OPCTS_BINARY) + " list --fields all");
  ASSERT_EQ(fields.status, 0) << fields.output;
  const std::string doc = read_file(kSource / "docs/catalog.md");
  std::istringstream lines(fields.output);
  std::string family, section;
  size_t keys = 0;
  const std::regex header(R"(^([a-z0-9_]+) fields \(YAML key)"), key(R"(^  ([a-z0-9_]+)( \(required\))?: )");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, header)) {
      family = m[1];
      const auto at = doc.find("\n### " + family + "\n");
      ASSERT_NE(at, std::string::npos) << "docs/catalog.md has no section ### " << family;
      section = doc.substr(at, doc.find("\n### ", at + 1) - at);
    } else if (std::regex_search(line, m, key)) {
      ++keys;
      const std::string row = "| `" + std::string(m[1]) + "`" + std::string(m[2]) + " |";
      EXPECT_NE(section.find(row), std::string::npos) << family << ": no row " << row << " in docs/catalog.md";
    }
  }
  EXPECT_GE(keys, 60u);
  for (const char* k : {"family", "description", "grids", "edges", "name", "tier", "why", "axes", "fixed", "problem"})
    EXPECT_NE(doc.find("| `" + std::string(k) + "` |"), std::string::npos) << k;
}

// docs/cli.md names every option of every subcommand that --help lists.
TEST(Docs, TheCliReferenceHasEveryOption) {
  const std::string doc = read_file(kSource / "docs/cli.md");
  const std::regex flag(R"((^|[\s,])(--[a-z][a-z0-9-]*))");
  for (const char* sub :
       {"list", "sample", "shrink", "run", "repro", "gate", "report merge", "report matrix", "report times",
        "report html", "report tightness", "resources", "manifest lint", "probe accumulators", "ctest-tests"}) {
    const Shell help = sh(std::string(OPCTS_BINARY) + " " + sub + " --help");
    ASSERT_EQ(help.status, 0) << help.output;
    const std::string options = help.output.substr(help.output.find("Options:"));
    for (std::sregex_iterator it(options.begin(), options.end(), flag), end; it != end; ++it) {
      const std::string f = (*it)[2];
      if (f == "--help") continue;
      EXPECT_NE(doc.find("`" + f), std::string::npos) << "opcts " << sub << " " << f << " is not in docs/cli.md";
    }
  }
  EXPECT_NE(doc.find("`opcts --version`"), std::string::npos);
}

// The code block of docs/plugins.md that follows `heading`.
std::string block_after(const std::string& doc, const std::string& heading) {
  const auto at = doc.find(heading);
  const auto open = doc.find("```sh\n", at);
  return doc.substr(open + 6, doc.find("```", open + 6) - open - 6);
}

// The example plugin, built with the command docs/plugins.md gives and run with its first green
// run: exit 0, cases PASS, and a SKIP's reason is the plugin's after its name, said once.
TEST(Docs, ThePluginExampleBuildsAndRunsAsDocumented) {
  const std::string doc = read_file(kSource / "docs/plugins.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(doc, m, std::regex(R"(`(cc -O2 -shared -fPIC [^`]+)`)")));
  const std::string dir = testutil::temp_dir();
  std::string build = m[1];
  build = std::regex_replace(build, std::regex("<opcts>"), kSource.string());
  build =
      std::regex_replace(build, std::regex(R"(\bmine\.c\b)"), (kSource / "plugins/example/example_plugin.c").string());
  build = std::regex_replace(build, std::regex(R"(\blibmine\.so\b)"), dir + "/libmine.so");
  const Shell cc = sh(build);
  ASSERT_EQ(cc.status, 0) << build << "\n" << cc.output;
  std::string run = std::regex_replace(block_after(doc, "## A first green run"), std::regex(R"(\\\n)"), " ");
  run = run.substr(run.find("build/cuda/bin/opcts"));
  run = std::regex_replace(run, std::regex(R"(build/cuda/bin/opcts)"), std::string(OPCTS_BINARY));
  run = std::regex_replace(run, std::regex(R"(build/cuda/bin/libopcts_example_plugin\.so)"), dir + "/libmine.so");
  const Shell r = sh("cd " + dir + " && " + run);
  EXPECT_EQ(r.status, 0) << run << "\n" << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(opcts host: [1-9][0-9]* PASS, 0 FAIL)"))) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/mine.xml"));
  const Shell list = sh(std::string(OPCTS_BINARY) + " list -v --arch host --tier smoke --plugin " + dir +
                        "/libmine.so --filter 'sdpa.example_*'");
  EXPECT_NE(list.output.find("\tSKIP: example.sdpa: computes the forward only\n"), std::string::npos) << list.output;
  EXPECT_EQ(list.output.find("example.sdpa: example.sdpa"), std::string::npos);
}

// ---- Citations stay inside the repository --------------------------------------------------------
// Code, catalogs, manifests, scripts and docs cite what a reader can open: a public source (a
// PyTorch file, a vendor document's section, a spec) or a page of docs/, never design notes kept
// outside the repository (a folder of spec notes, the design, style and device notes beside a
// checkout), which a reader of the repository cannot open.

// A file that plants such citations on purpose (TheCitationScanFlagsEveryPlantedCitation reads it).
const char* const kPlantedCitations = "tests/data/outside_citations/planted.txt";

struct Citation {
  size_t line;       // 1-based
  std::string text;  // the line
};

// Every line of `text` (the file `rel`, among the repository's `files`) that cites what a reader of
// the repository cannot open: a Markdown page cited by a section mark or an anchor that is not a
// page of the repository (by its path from the root or from the citing file's folder, or by its
// name), an upper-case Markdown page name that is not one, a relative path that climbs out of the
// repository or climbs to a page that is not one of it, or a Markdown link to a relative path that names nothing in it.
std::vector<Citation> outside_citations(const std::string& text, const std::string& rel,
                                        const std::vector<std::string>& files) {
  static const std::regex section(R"(([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)(\s*§|#[A-Za-z0-9]))");
  static const std::regex upper(R"((^|[\s(`'"\[])([A-Z][A-Z0-9_-]*\.md)\b)");
  static const std::regex climb(R"((^|[\s(`'"\[])((\.\./)+[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*))");
  static const std::regex climbing_page(R"(((\.\./)+[A-Za-z0-9_./-]*\.md))");
  static const std::regex link(R"(\]\((\.\./[^)#\s]+))");
  std::set<std::string> pages, names;
  for (const std::string& f : files) {
    if (!f.ends_with(".md")) continue;
    pages.insert(f);
    names.insert(fs::path(f).filename().string());
  }
  const fs::path dir = fs::path(rel).parent_path();
  const auto is_page = [&](const std::string& p) {
    return pages.count(p) || pages.count((dir / p).lexically_normal().string()) ||
           names.count(fs::path(p).filename().string());
  };
  const auto leaves = [&](const std::string& p) {
    const fs::path to = (dir / p).lexically_normal();
    return to.empty() || *to.begin() == "..";
  };
  const auto each = [](const std::string& line, const std::regex& re, int group, const auto& bad_if) {
    for (std::sregex_iterator m(line.begin(), line.end(), re), end; m != end; ++m)
      if (bad_if((*m)[group].str())) return true;
    return false;
  };
  const auto missing = [&](const std::string& p) { return !fs::exists(kSource / (dir / p).lexically_normal()); };
  const auto not_page = [&](const std::string& p) { return !is_page(p); };
  std::vector<Citation> out;
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const bool md = line.find(".md") != std::string::npos, up = line.find("../") != std::string::npos;
    if ((md && (each(line, section, 1, not_page) || each(line, upper, 2, not_page) ||
                each(line, climbing_page, 1, not_page))) ||
        (up && (each(line, climb, 2, leaves) || each(line, link, 1, missing))))
      out.push_back({n, line});
  }
  return out;
}

// The repository's files: git's list of tracked files, else (a tree without git) every file
// under the source folder but hidden entries and top-level build* folders.
std::vector<std::string> repository_files() {
  std::vector<std::string> out;
  const Shell git = sh("git -C '" + kSource.string() + "' ls-files -z");
  if (git.status == 0) {
    std::istringstream in(git.output);
    for (std::string f; std::getline(in, f, '\0');)
      if (!f.empty()) out.push_back(f);
    return out;
  }
  for (auto it = fs::recursive_directory_iterator(kSource); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (name.rfind(".", 0) == 0 || (it.depth() == 0 && name.rfind("build", 0) == 0)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) out.push_back(fs::relative(it->path(), kSource).string());
  }
  return out;
}

TEST(Docs, NoFileCitesNotesOutsideTheRepository) {
  const auto files = repository_files();
  ASSERT_GE(files.size(), 300u);
  std::string found;
  size_t scanned = 0;
  for (const std::string& rel : files) {
    if (rel == kPlantedCitations || !fs::is_regular_file(kSource / rel)) continue;
    ++scanned;
    for (const Citation& c : outside_citations(read_file(kSource / rel), rel, files))
      found += rel + ":" + std::to_string(c.line) + ": " + c.text + "\n";
  }
  EXPECT_GE(scanned, 300u);
  EXPECT_TRUE(found.empty()) << "cite the public source or a docs/ page instead:\n" << found;
}

// The scan flags every line of the planted file that starts with "+" and no other line, so the
// tree scan above can fail.
TEST(Docs, TheCitationScanFlagsEveryPlantedCitation) {
  const std::string text = read_file(kSource / kPlantedCitations);
  std::set<size_t> want, got;
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("+", 0) == 0) want.insert(n);
  }
  ASSERT_GE(want.size(), 6u);
  for (const Citation& c : outside_citations(text, kPlantedCitations, repository_files())) got.insert(c.line);
  EXPECT_EQ(got, want);
}

// The items of docs/adding-a-family.md's "Every wing has" list: the path each bullet starts with
// (`families/<f>/...`, a `*` in its file name standing for any run of characters).
std::vector<std::string> wing_checklist(const std::string& doc) {
  const auto at = doc.find("\n## Every wing has\n");
  if (at == std::string::npos) return {};
  const std::string section = doc.substr(at + 1, doc.find("\n## ", at + 1) - at - 1);
  std::vector<std::string> out;
  const std::regex item(R"(^- `(families/<f>/[^`]+)`)");
  std::istringstream in(section);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, item)) out.push_back(m[1]);
  }
  return out;
}

// What wing `wing` (a folder of families/) lacks of the checklist item `pattern`, "" for nothing.
std::string wing_lacks(const fs::path& wing, const std::string& pattern) {
  std::string rel = pattern.substr(std::string("families/<f>/").size());
  const std::string f = wing.filename().string();
  for (auto p = rel.find("<f>"); p != std::string::npos; p = rel.find("<f>")) rel.replace(p, 3, f);
  const fs::path path = wing / rel;
  const std::string name = path.filename().string();
  const auto star = name.find('*');
  if (star == std::string::npos) return fs::is_regular_file(path) ? "" : (wing / rel).string();
  const std::string head = name.substr(0, star), tail = name.substr(star + 1);
  if (fs::is_directory(path.parent_path()))
    for (const auto& e : fs::directory_iterator(path.parent_path())) {
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && n.size() >= head.size() + tail.size() && n.rfind(head, 0) == 0 && n.ends_with(tail))
        return "";
    }
  return (wing / rel).string() + " (no file matches)";
}

// docs/adding-a-family.md's "Every wing has" holds for every wing, and cmake/families.cmake's
// order names only wings (the build registers every wing, named there or not); the check sees a
// wing that lacks an item.
TEST(Docs, EveryWingHasTheFilesTheChecklistNames) {
  const auto items = wing_checklist(read_file(kSource / "docs/adding-a-family.md"));
  ASSERT_GE(items.size(), 6u) << "docs/adding-a-family.md has no '## Every wing has' list";
  std::set<std::string> wings;
  for (const auto& e : fs::directory_iterator(kSource / "families")) {
    if (!e.is_directory()) continue;
    wings.insert(e.path().filename().string());
    for (const auto& item : items) EXPECT_EQ(wing_lacks(e.path(), item), "") << "the wing lacks " << item;
  }
  EXPECT_GE(wings.size(), 6u);
  std::smatch m;
  const std::string cmake = read_file(kSource / "cmake/families.cmake");
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(\nset\(OPCTS_FAMILY_ORDER ([a-z0-9_ ]+)\))")));
  std::istringstream words(m[1].str());
  for (std::string w; words >> w;) EXPECT_TRUE(wings.count(w)) << "cmake/families.cmake orders '" << w << "', no wing";

  // A planted wing: an empty one lacks every item, one with only the header lacks the rest.
  const fs::path planted = fs::path(testutil::temp_dir()) / "families" / "planted";
  fs::create_directories(planted / "host");
  for (const auto& item : items) EXPECT_NE(wing_lacks(planted, item), "") << item;
  std::ofstream(planted / "planted.hpp") << "#pragma once\n";
  std::ofstream(planted / "host" / "planted.cpp") << "\n";
  EXPECT_EQ(wing_lacks(planted, "families/<f>/<f>.hpp"), "");
  EXPECT_EQ(wing_lacks(planted, "families/<f>/host/*.cpp"), "");
  EXPECT_NE(wing_lacks(planted, "families/<f>/host/*.cu"), "");
  EXPECT_NE(wing_lacks(planted, "families/<f>/fields.cpp"), "");
}

}  // namespace
}  // namespace opcts
