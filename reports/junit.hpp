// JUnit XML for result records: written for CI consumers (GitLab, Jenkins), read back for merging.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace opcts {

/// How much of a record a testcase's <properties> carry. `lean` (the default): a passing case
/// its id, impl and tier (~400 bytes a testcase, where CI servers ignore properties and
/// xunit-viewer lists them above the failure); any other outcome also its outcomes, message,
/// expectation, worst elements and repro. `all`: every field of the record (seed, device, ms,
/// each output's statistics), as the .jsonl results hold them.
enum class JunitDetail { lean, all };
/// "lean" or "all" (--junit-properties); throws std::invalid_argument naming the option.
JunitDetail parse_junit_detail(const std::string& s);

/// Writes `records` as JUnit XML to `path`, atomically (a temporary file renamed over it).
/// One <testsuite> per family, one <testcase classname="<family>.<arch>" name="<id after
/// 'family.'>"> per record; FAIL/XPASS become <failure>, ERROR/CRASH/TIMEOUT <error>,
/// SKIP <skipped>, XFAIL <skipped type="xfail"> (pytest's convention). Every testcase
/// carries <properties> (as `detail` says) from which read_junit rebuilds the record: all of it
/// under JunitDetail::all, its outcome, identity and failure details under lean. Any bytes in messages
/// are made valid XML 1.0 with sanitize_xml_text. Throws std::runtime_error on I/O failure.
void write_junit(const std::vector<ResultRecord>& records, const std::string& path, const std::string& suite_name,
                 JunitDetail detail = JunitDetail::lean);

/// The JUnit XML write_junit writes, as text (for write_files, which writes several reports
/// all or none). `selections` (judge/run_selection.hpp, each as its JSON) go into a last
/// testsuite "opcts.selection" without testcases, one property "opcts.selection" each.
std::string junit_xml(const std::vector<ResultRecord>& records, const std::string& suite_name,
                      JunitDetail detail = JunitDetail::lean, const std::vector<std::string>& selections = {});

/// Reads a file written by write_junit (at most kMaxReportBytes) back into records (from the
/// testcase properties, and for a lean report its classname, time and result element), in file
/// order, and the selections it carries into `selections` when given. Throws
/// std::runtime_error naming the file and what is wrong.
std::vector<ResultRecord> read_junit(const std::string& path, std::vector<std::string>* selections = nullptr);

/// Makes arbitrary bytes valid, readable XML 1.0 text: valid UTF-8 is kept; C0 controls other
/// than tab/LF/CR become "\xNN"; bytes that are not valid UTF-8 (stray, overlong, truncated,
/// surrogates) become "\xNN" too; U+FFFE and U+FFFF (not XML characters) become "\u{fffe}".
std::string sanitize_xml_text(std::string_view bytes);

}  // namespace opcts
