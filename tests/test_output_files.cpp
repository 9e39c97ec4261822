// Safe report files: written through symlinks, all of a set or none (a full disk changes
// nothing), one path per output, and repro lines that a POSIX shell reads back word for word.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "reports/output_files.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::exits_with;
using testutil::read_file;
using testutil::sh;
using testutil::Shell;

TEST(OutputFiles, WritesThroughSymlinksToTheirTargets) {
  const fs::path dir = testutil::temp_dir();
  fs::create_directories(dir / "real");
  std::ofstream(dir / "real" / "j.xml") << "old";
  fs::create_symlink("real/j.xml", dir / "hop");   // relative, resolved against the link's folder
  fs::create_symlink(dir / "hop", dir / "j.xml");  // a chain of two
  write_files({{(dir / "j.xml").string(), "new"}});
  EXPECT_TRUE(fs::is_symlink(dir / "j.xml"));
  EXPECT_TRUE(fs::is_symlink(dir / "hop"));
  EXPECT_EQ(read_file(dir / "real" / "j.xml"), "new");
  // A dangling link is written through too: its target is created.
  fs::create_symlink("made.txt", dir / "dangling");
  write_files({{(dir / "dangling").string(), "x"}});
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  EXPECT_EQ(read_file(dir / "made.txt"), "x");
  fs::create_symlink("loop", dir / "loop");
  EXPECT_THROW(write_files({{(dir / "loop").string(), "x"}}), std::runtime_error);
}

TEST(OutputFiles, AFailedWriteLeavesEveryFileAsItWas) {
  const fs::path dir = testutil::temp_dir();
  std::ofstream(dir / "a.txt") << "old a";
  std::ofstream(dir / "b.txt") << "old b";
  // /dev/full fails every write with ENOSPC: a full disk, for one file of the set.
  try {
    write_files({{(dir / "a.txt").string(), "new a"}, {"/dev/full", "x"}, {(dir / "b.txt").string(), "new b"}});
    FAIL() << "a write to /dev/full succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(dir / "a.txt"), "old a");
  EXPECT_EQ(read_file(dir / "b.txt"), "old b");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left.size(), 2u) << "temporary files left behind";
  write_files({{(dir / "a.txt").string(), "new a"}, {(dir / "b.txt").string(), "new b"}});
  EXPECT_EQ(read_file(dir / "a.txt"), "new a");
  EXPECT_EQ(read_file(dir / "b.txt"), "new b");
}

TEST(OutputFiles, TheSameFileForTwoOutputsIsAnError) {
  const fs::path dir = testutil::temp_dir();
  fs::create_symlink(dir / "r.jsonl", dir / "link");
  const std::string r = (dir / "r.jsonl").string();
  EXPECT_THROW(check_distinct_outputs({{"--junit", r}, {"--results", r}}), std::invalid_argument);
  EXPECT_THROW(check_distinct_outputs({{"--junit", (dir / "link").string()}, {"--results", r}}), std::invalid_argument);
  EXPECT_THROW(check_distinct_outputs({{"--junit", (dir / "." / "r.jsonl").string()}, {"--results", r}}),
               std::invalid_argument);
  EXPECT_NO_THROW(check_distinct_outputs({{"--junit", (dir / "j.xml").string()}, {"--results", r}, {"--summary", ""}}));
  EXPECT_TRUE(exits_with(
      sh(std::string(OPCTS_BINARY) + " run --arch host --tier smoke --family cast --junit " + r + " --results " + r), 2,
      "--junit and --results are the same file"));
}

TEST(OutputFiles, MergeWritesAllReportsOrNone) {
  const fs::path dir = testutil::temp_dir();
  std::ofstream(dir / "in.jsonl") << to_json_line(testutil::passing_record()) << "\n";
  std::ofstream(dir / "j.xml") << "old";
  const std::string merge = std::string(OPCTS_BINARY) + " report merge " + (dir / "in.jsonl").string();
  const Shell full = sh(merge + " --junit " + (dir / "j.xml").string() + " --summary /dev/full");
  EXPECT_EQ(full.status, 2) << full.output;
  EXPECT_EQ(read_file(dir / "j.xml"), "old");
  // A device that is no regular file (a pipe here) is written in place, never replaced.
  EXPECT_TRUE(exits_with(sh(merge + " --junit /dev/stdout"), 0, "<testsuites"));
}

// The repro line is pasted into shells: each argument must come back as exactly one word,
// and nothing in a hostile path may run.
TEST(ReproLine, HostilePathsRoundTripThroughSh) {
  const fs::path dir = testutil::temp_dir();
  const std::string pwned = (dir / "PWNED").string();
  const std::vector<std::string> hostile{"it's $(touch " + pwned + ")",
                                         "`touch " + pwned + "`",
                                         "a b\tc\nd",
                                         "; touch " + pwned + " #",
                                         "\"quoted\" \\back\\ 'single'",
                                         "*?[glob]",
                                         "--arch",
                                         "$HOME ${HOME} ~",
                                         "'",
                                         "''\\''"};
  for (const auto& m : hostile) {
    const std::string line = repro_command("cast.host_cvt/x", "host", m, {m, "plain.so"});
    ASSERT_EQ(line.rfind("opcts ", 0), 0u);
    // Let the shell split the line; printf prints each word it got, NUL-terminated.
    const std::string script = "printf '%s\\0' " + line.substr(6);
    const Shell r = sh("sh -c " + shell_quote(script));
    ASSERT_EQ(r.status, 0) << line;
    const std::vector<std::string> want{"repro", "cast.host_cvt/x", "--arch", "host",     "--manifest",
                                        m,       "--plugin",        m,        "--plugin", "plain.so"};
    std::vector<std::string> got;
    for (size_t at = 0, nul; (nul = r.output.find('\0', at)) != std::string::npos; at = nul + 1)
      got.push_back(r.output.substr(at, nul - at));
    EXPECT_EQ(got, want) << line;
  }
  EXPECT_FALSE(fs::exists(pwned));
}

}  // namespace
}  // namespace opcts
