// opcts as a tool: the binary finds its cases relative to itself (else $OPCTS_CASES_DIR, else
// --cases-dir), never the clone it was built from; `cmake --install` gives a tree that runs
// from any folder with no environment set.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/result.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::sh;
using testutil::Shell;

// A copy of the binary alone reads no catalogs it was not given: it says where it looked and
// the two other ways to give them.
TEST(Install, ACopiedBinaryFindsNoCasesAndSaysWhy) {
  const std::string dir = testutil::temp_dir();
  fs::create_directories(dir + "/bin");
  fs::copy_file(OPCTS_BINARY, dir + "/bin/opcts");
  const std::string list = " list --arch host --tier smoke --family cast --count";
  const Shell none = sh("cd / && env -i " + dir + "/bin/opcts" + list);
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("no cases folder at " + dir + "/share/opcts/cases (--cases-dir, else $OPCTS_CASES_DIR"),
            std::string::npos)
      << none.output;
  const Shell env =
      sh("cd / && env -i OPCTS_CASES_DIR=" + std::string(OPCTS_SOURCE_CASES_DIR) + " " + dir + "/bin/opcts" + list);
  EXPECT_EQ(env.status, 0) << env.output;
  const Shell flag = sh("cd / && env -i OPCTS_CASES_DIR=/nonexistent " + dir + "/bin/opcts" + list + " --cases-dir " +
                        OPCTS_SOURCE_CASES_DIR);
  EXPECT_EQ(flag.status, 0) << flag.output;  // the flag wins over the variable
  EXPECT_EQ(flag.output, env.output);
}

// cmake --install into a prefix: bin/opcts, lib/opcts/ (the example plugin), include/opcts/,
// share/opcts/cases/, share/doc/opcts/; the installed binary runs from / with an empty environment.
TEST(Install, TheInstalledTreeRunsFromAnyFolder) {
  const std::string dir = testutil::temp_dir();
  const std::string prefix = dir + "/prefix";
  const Shell inst = sh(std::string(OPCTS_CMAKE) + " --install " + OPCTS_BINARY_DIR + " --prefix " + prefix);
  ASSERT_EQ(inst.status, 0) << inst.output;
  for (const char* f :
       {"bin/opcts", "include/opcts/plugin.h", "share/opcts/cases/archs.yaml", "share/opcts/cases/manifests/sm90.yaml",
        "share/doc/opcts/README.md", "share/doc/opcts/docs/cli.md", "share/doc/opcts/examples/example_plugin.c"})
    EXPECT_TRUE(fs::exists(fs::path(prefix) / f)) << f;
  fs::path plugin;
  for (const auto& e : fs::recursive_directory_iterator(prefix))
    if (e.path().filename() == "libopcts_example_plugin.so") plugin = e.path();
  ASSERT_FALSE(plugin.empty()) << inst.output;
  EXPECT_EQ(plugin.parent_path().filename(), "opcts");
  const Shell version = sh("cd / && env -i " + prefix + "/bin/opcts --version");
  EXPECT_NE(version.output.find("cases:  " + prefix + "/share/opcts/cases"), std::string::npos) << version.output;
  const std::string out = dir + "/out";
  fs::create_directories(out);
  const Shell run = sh("cd " + out + " && env -i " + prefix +
                       "/bin/opcts run --arch host --tier smoke --filter 'cast.host_cvt/*e2m1*'"
                       " --plugin " +
                       plugin.string() + " --results r.jsonl --junit j.xml --no-ref-cache");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_FALSE(read_results_file(out + "/r.jsonl").empty());
  const Shell plug = sh("cd / && env -i " + prefix + "/bin/opcts list --arch host --tier smoke --plugin " +
                        plugin.string() + " --filter 'sdpa.example_*' --count");
  EXPECT_EQ(plug.status, 0) << plug.output;
  EXPECT_NE(plug.output, "0\n");
#if OPCTS_HAVE_PYTHON
  // The Python plugin host and its package install beside them, and run a .py plugin from /.
  bool host = false;
  for (const auto& e : fs::recursive_directory_iterator(prefix))
    host = host || (e.path().filename() == "libopcts_python.so" && e.path().parent_path() == plugin.parent_path());
  EXPECT_TRUE(host) << "libopcts_python.so beside the example plugin";
  EXPECT_TRUE(fs::exists(fs::path(prefix) / "share/opcts/python/opcts/__init__.py"));
  const Shell py =
      sh("cd / && env -i " + prefix + "/bin/opcts run --arch host --tier smoke --plugin " + OPCTS_SOURCE_DIR +
         "/plugins/python/examples/numpy_cast.py --filter 'cast.np_cast/*e2m1*' --exclude '*_random*'"
         " --results " +
         out + "/py.jsonl --no-ref-cache");
  EXPECT_EQ(py.status, 0) << py.output;
  EXPECT_EQ(read_results_file(out + "/py.jsonl").size(), 4u) << py.output;
#endif
}

}  // namespace
}  // namespace opcts
