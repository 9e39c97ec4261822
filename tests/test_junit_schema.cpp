// The JUnit that write_junit writes validates against the Ant/Jenkins schema (tests/data/junit_ant.xsd) with xmllint.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "reports/junit.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::read_file;

const std::string kXsd = std::string(OPCTS_SOURCE_CASES_DIR) + "/../tests/data/junit_ant.xsd";

bool have_xmllint() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

// xmllint's exit status: 0 valid, 3 invalid against the schema, others for I/O or parse errors.
int validate(const std::string& xml, const std::string& log) {
  const std::string cmd = "xmllint --noout --schema '" + kXsd + "' '" + xml + "' >'" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::vector<ResultRecord> hostile_records() {
  const std::string hostile =
      std::string("ctl\x01\x08 esc\x1b[31m ff\xff\xfe trunc\xe2\x82 ]]> <![CDATA[x]]> <&>\"' nul") +
      std::string(1, '\0') + " \xef\xbf\xbe end";
  std::vector<ResultRecord> rs;
  int k = 0;
  for (Outcome o : {Outcome::PASS, Outcome::FAIL, Outcome::ERROR, Outcome::CRASH, Outcome::TIMEOUT, Outcome::SKIP,
                    Outcome::XFAIL, Outcome::XPASS, Outcome::FLAKE, Outcome::MISTRUSTED, Outcome::MISSING}) {
    ResultRecord r;
    r.family = k % 2 ? "sdpa" : "cast";
    r.impl = "host.x";
    r.id = r.family + ".host_x/case_" + std::to_string(k++) + "_" + hostile.substr(0, 5);
    r.arch = "sm90";
    r.outcome = o;
    r.raw_outcome = o == Outcome::XFAIL ? Outcome::FAIL : o == Outcome::XPASS ? Outcome::PASS : o;
    r.message = hostile;
    r.ms = 1.5;
    r.repro = "opcts repro ']]>\x07' --arch sm90";
    r.outputs.push_back({"y\x02]]>", "allclose", 4, 0.5, 0.25, 0.1, 0, 2});
    r.worst.push_back({"y", {0, 1}, 1.0, 0.5});
    rs.push_back(r);
  }
  return rs;
}

TEST(JunitSchema, EveryOutcomeWithHostileMessagesValidates) {
  if (!have_xmllint())
    GTEST_SKIP() << "xmllint not found (Debian package libxml2-utils; scripts/install-deps.sh installs it)";
  const auto dir = testutil::temp_dir();
  const std::string xml = dir + "/hostile.xml", log = dir + "/xmllint.log";
  write_junit(hostile_records(), xml, "opcts\x03 sm90 ]]>");
  EXPECT_EQ(validate(xml, log), 0) << read_file(log);
}

TEST(JunitSchema, AnEmptyReportValidates) {
  if (!have_xmllint()) GTEST_SKIP() << "xmllint not found (Debian package libxml2-utils)";
  const auto dir = testutil::temp_dir();
  const std::string xml = dir + "/empty.xml", log = dir + "/xmllint.log";
  write_junit({}, xml, "opcts");
  EXPECT_EQ(validate(xml, log), 0) << read_file(log);
}

// The schema has teeth: what earlier writers emitted, or a testcase with two results, is refused.
TEST(JunitSchema, TheSchemaRefusesWhatItForbids) {
  if (!have_xmllint()) GTEST_SKIP() << "xmllint not found (Debian package libxml2-utils)";
  const auto dir = testutil::temp_dir();
  const std::string log = dir + "/xmllint.log";
  const std::string suite_open =
      R"(<testsuite name="f" package="f" id="0" tests="1" failures="1" errors="0" time="0.1" )"
      R"(timestamp="2024-01-02T03:04:05" hostname="h"><properties/>)";
  const std::string suite_close = "<system-out/><system-err/></testsuite>";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"skipped on testsuites", R"(<testsuites skipped="1">)" + suite_open +
                                    R"(<testcase name="a" classname="f" time="0"/>)" + suite_close + "</testsuites>"},
      {"no package/id", R"(<testsuites><testsuite name="f" tests="0" failures="0" errors="0" time="0" )"
                        R"(timestamp="2024-01-02T03:04:05" hostname="h"><properties/><system-out/><system-err/>)"
                        "</testsuite></testsuites>"},
      {"failure and error", "<testsuites>" + suite_open +
                                R"(<testcase name="a" classname="f" time="0"><failure type="FAIL"/><error type="E"/>)"
                                "</testcase>" +
                                suite_close + "</testsuites>"},
      {"failure without type", "<testsuites>" + suite_open +
                                   R"(<testcase name="a" classname="f" time="0"><failure message="m"/></testcase>)" +
                                   suite_close + "</testsuites>"},
  };
  for (const auto& [what, text] : bad) {
    const std::string xml = testutil::write(dir, "bad.xml", "<?xml version=\"1.0\"?>\n" + text);
    EXPECT_EQ(validate(xml, log), 3) << what << "\n" << read_file(log);
  }
}

}  // namespace
}  // namespace opcts
