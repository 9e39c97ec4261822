// `opcts run --sanitize TOOL` end to end on the host device, with a stand-in for compute-sanitizer
// that takes its options (--tool, --error-exitcode, --log-file), runs the worker and writes a
// memcheck-style log: a reported error FAILs the case with failure kind `sanitizer` and the log's
// first report in the message; a clean log leaves the verdict alone; a missing sanitizer or an
// unknown tool is a usage error naming it.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "core/result.hpp"
#include "runner/supervisor.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using testutil::sh;
using testutil::Shell;

const std::string kOpcts = OPCTS_BINARY;

// Reports FAKE_REPORT (when set) for each worker it runs, as compute-sanitizer's log would.
constexpr const char* kFakeSanitizer = R"sh(#!/bin/sh
tool= code=0 log=
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode) code=$2; shift 2 ;;
    --log-file) log=$2; shift 2 ;;
    *) break ;;
  esac
done
echo "$tool" >> "$FAKE_CALLS"
echo "${OPCTS_STREAM_GATE_MS:-unset}" >> "$FAKE_CALLS.gate"
"$@"
rc=$?
{
  echo "========= COMPUTE-SANITIZER"
  if [ -n "$FAKE_REPORT" ]; then
    echo "========= $FAKE_REPORT"
    echo "=========     at fake_kernel(float*)+0x70 in fake.cu:12"
    echo "=========     by thread (3,0,0) in block (0,0,0)"
    echo "=========     Address 0x7f0000000100 is out of bounds"
    echo "========="
    echo "========= ERROR SUMMARY: 1 error"
  else
    echo "========= ERROR SUMMARY: 0 errors"
  fi
} > "$log"
if [ -n "$FAKE_REPORT" ] && [ $rc -eq 0 ]; then exit $code; fi
exit $rc
)sh";

class Sanitize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testutil::temp_dir();
    testutil::write(dir_, "eight.yaml", testutil::kEightCatalog);
    testutil::write(dir_, "fake-sanitizer", kFakeSanitizer);
    chmod((dir_ + "/fake-sanitizer").c_str(), 0755);
  }
  Shell run(const std::string& env, const std::string& more = "") const {
    return sh(env + " FAKE_CALLS=" + dir_ + "/calls " + kOpcts +
              " run --arch host --tier smoke --no-ref-cache --shrink-seconds 0 --reruns 0 --catalog " + dir_ +
              "/eight.yaml --filter " + testutil::kTinyFilter + " --results " + dir_ + "/r.jsonl --sanitize memcheck " +
              "--sanitizer " + dir_ + "/fake-sanitizer " + more);
  }
  std::vector<ResultRecord> records() const { return read_results_file(dir_ + "/r.jsonl"); }
  std::string dir_;
};

TEST_F(Sanitize, AReportedErrorFailsEachCaseWithItsFirstReport) {
  const Shell r = run("FAKE_REPORT='Invalid __global__ write of size 4 bytes'");
  EXPECT_EQ(r.status, 1) << r.output;
  const auto recs = records();
  ASSERT_EQ(recs.size(), 8u);
  for (const ResultRecord& rec : recs) {
    EXPECT_EQ(rec.raw_outcome, Outcome::FAIL) << rec.id;
    ASSERT_EQ(rec.failures.size(), 1u) << rec.id;
    EXPECT_EQ(rec.failures[0].kind, FailureKind::sanitizer) << rec.id;
    EXPECT_EQ(rec.message,
              "compute-sanitizer memcheck: Invalid __global__ write of size 4 bytes | at fake_kernel(float*)+0x70 in "
              "fake.cu:12 | by thread (3,0,0) in block (0,0,0)")
        << rec.id;
  }
  // One worker a case, each under the tool asked for.
  std::ifstream calls(dir_ + "/calls");
  int n = 0;
  for (std::string line; std::getline(calls, line); ++n) EXPECT_EQ(line, "memcheck");
  EXPECT_EQ(n, 8);
  // Each worker holds no stream (OPCTS_STREAM_GATE_MS=0): under the sanitizer a run call may wait
  // for the device, and a held stream would cost it the whole hold.
  std::ifstream gate(dir_ + "/calls.gate");
  n = 0;
  for (std::string line; std::getline(gate, line); ++n) EXPECT_EQ(line, "0");
  EXPECT_EQ(n, 8);
}

TEST_F(Sanitize, ACleanLogLeavesTheVerdictAlone) {
  const Shell r = run("FAKE_REPORT=");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const ResultRecord& rec : records()) {
    EXPECT_EQ(rec.raw_outcome, Outcome::PASS) << rec.id << ": " << rec.message;
    EXPECT_TRUE(rec.failures.empty()) << rec.id;
  }
}

TEST_F(Sanitize, AMissingSanitizerOrToolIsAUsageError) {
  const Shell missing = sh(kOpcts + " run --arch host --tier smoke --catalog " + dir_ + "/eight.yaml --filter " +
                           testutil::kTinyFilter + " --sanitize memcheck --sanitizer " + dir_ + "/no-such-sanitizer");
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find("no-such-sanitizer"), std::string::npos) << missing.output;
  const Shell tool = sh(kOpcts + " run --arch host --tier smoke --sanitize leakcheck");
  EXPECT_EQ(tool.status, 2) << tool.output;
  EXPECT_NE(tool.output.find("--sanitize must be memcheck, racecheck, synccheck or initcheck"), std::string::npos)
      << tool.output;
}

TEST(SanitizerReport, FirstReportOfARealLogShape) {
  const std::string log =
      "========= COMPUTE-SANITIZER\n"
      "========= Barrier error detected. Divergent thread(s) in warp\n"
      "=========     at bwd_kernel+0x1c0 in sdpa_flash_backward.cu:400\n"
      "=========\n"
      "========= Invalid __shared__ read of size 16 bytes\n"
      "========= ERROR SUMMARY: 2 errors\n";
  EXPECT_EQ(first_sanitizer_report(log),
            "Barrier error detected. Divergent thread(s) in warp | at bwd_kernel+0x1c0 in sdpa_flash_backward.cu:400");
  EXPECT_EQ(first_sanitizer_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"), "");
  EXPECT_EQ(first_sanitizer_report(""), "");
}

}  // namespace
}  // namespace opcts
