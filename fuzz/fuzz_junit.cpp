// Fuzzes the JUnit writer and reader (reports/junit.hpp). The input drives a few ResultRecords
// (ids, families, messages and names with arbitrary bytes; any outcome; doubles including NaN,
// ±Inf, -0, subnormals), which are written with write_junit and checked:
//   - the file is well-formed XML (pugixml parses it) and holds only XML 1.0 characters in
//     valid UTF-8 (sanitize_xml_text leaves it unchanged);
//   - the <testsuites> counts match the records;
//   - read_junit reads it back (it must not throw on what write_junit wrote) with, per record
//     in file order (families sorted, records in given order within one), the same outcome,
//     raw outcome, device and ms (bitwise; any NaN for a NaN), and the id, arch, impl, seed,
//     message, repro and tier equal to sanitize_xml_text of the originals; worst elements
//     and per-output statistics likewise when the output names are distinct.
// sanitize_xml_text itself is checked on the raw input: it is idempotent (its output holds
// nothing it would escape again).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "core/result.hpp"
#include "fuzz/fuzz_util.hpp"
#include "reports/junit.hpp"

namespace {

using opcts::Outcome;
using opcts_fuzz::fail;

std::string str(FuzzedDataProvider& fdp, size_t max = 48) { return fdp.ConsumeRandomLengthString(max); }

double num(FuzzedDataProvider& fdp) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: return std::numeric_limits<double>::quiet_NaN();
    case 1: return -std::numeric_limits<double>::quiet_NaN();
    case 2: return std::numeric_limits<double>::infinity();
    case 3: return -std::numeric_limits<double>::infinity();
    case 4: return -0.0;
    case 5: return std::numeric_limits<double>::denorm_min();
    case 6: return std::bit_cast<double>(fdp.ConsumeIntegral<uint64_t>());  // any bits, NaN payloads too
    case 7: return fdp.ConsumeIntegral<int32_t>() / 1000.0;
    default: return fdp.ConsumeFloatingPoint<double>();
  }
}

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

opcts::ResultRecord record(FuzzedDataProvider& fdp) {
  opcts::ResultRecord r;
  const std::string fam = fdp.ConsumeBool() ? std::string("sdpa") : str(fdp, 12);
  r.family = fdp.ConsumeBool() ? fam : "";
  r.id = fdp.ConsumeBool() ? fam + "." + str(fdp) : str(fdp);
  r.impl = str(fdp, 16);
  r.arch = str(fdp, 8);
  r.device = fdp.ConsumeIntegral<int>();
  r.outcome = static_cast<Outcome>(fdp.ConsumeIntegralInRange<int>(0, static_cast<int>(Outcome::MISSING)));
  r.raw_outcome = static_cast<Outcome>(fdp.ConsumeIntegralInRange<int>(0, static_cast<int>(Outcome::MISSING)));
  r.seed = str(fdp, 16);
  r.ms = num(fdp);
  r.message = str(fdp, 200);
  r.repro = str(fdp, 64);
  r.tier = str(fdp, 8);
  const int outputs = fdp.ConsumeIntegralInRange<int>(0, 3);
  for (int k = 0; k < outputs; ++k) {
    opcts::OutputStats o;
    o.out = fdp.ConsumeBool() ? std::string(k ? "lse" : "O") : str(fdp, 8);
    o.metric = fdp.ConsumeBool() ? std::string("ref_relative") : str(fdp, 12);
    o.elements = fdp.ConsumeIntegral<int64_t>();
    o.max_abs_err = num(fdp);
    o.max_rel_err = num(fdp);
    o.bound = num(fdp);
    o.lowp_err = num(fdp);
    o.mismatches = fdp.ConsumeIntegral<int64_t>();
    o.max_ratio = num(fdp);
    if (fdp.ConsumeBool()) {
      o.slope = num(fdp);
      o.slope_lo = num(fdp);
      o.slope_hi = num(fdp);
    }
    r.outputs.push_back(o);
  }
  const int worst = fdp.ConsumeIntegralInRange<int>(0, 3);
  for (int k = 0; k < worst; ++k) {
    opcts::WorstElement w;
    w.out = str(fdp, 8);
    const int dims = fdp.ConsumeIntegralInRange<int>(0, 4);
    for (int d = 0; d < dims; ++d) w.index.push_back(fdp.ConsumeIntegral<int64_t>());
    w.got = num(fdp);
    w.want = num(fdp);
    r.worst.push_back(w);
  }
  return r;
}

std::string family_of(const opcts::ResultRecord& r) {  // as reports/junit.cpp groups records
  if (!r.family.empty()) return r.family;
  const auto dot = r.id.find('.');
  return dot == std::string::npos ? std::string("unknown") : r.id.substr(0, dot);
}

void check_sanitize(std::string_view bytes) {
  const std::string s = opcts::sanitize_xml_text(bytes);
  if (opcts::sanitize_xml_text(s) != s) fail("sanitize_xml_text is not idempotent");
}

void check_same(const opcts::ResultRecord& want, const opcts::ResultRecord& got, size_t i) {
  using opcts::sanitize_xml_text;
  const auto field = [&](const char* name, const std::string& a, const std::string& b) {
    if (sanitize_xml_text(a) != b)
      fail("record " + std::to_string(i) + " field " + name + ": wrote '" + sanitize_xml_text(a) + "', read '" + b +
           "'");
  };
  field("id", want.id, got.id);
  if (got.outcome != want.outcome) fail("record " + std::to_string(i) + ": outcome differs");
  if (got.raw_outcome != want.raw_outcome) fail("record " + std::to_string(i) + ": raw_outcome differs");
  field("arch", want.arch, got.arch);
  field("impl", want.impl, got.impl);
  field("seed", want.seed, got.seed);
  field("message", want.message, got.message);
  field("repro", want.repro, got.repro);
  field("tier", want.tier, got.tier);
  if (got.device != want.device) fail("record " + std::to_string(i) + ": device differs");
  if (!same(got.ms, want.ms)) fail("record " + std::to_string(i) + ": ms differs");
  if (got.worst.size() != want.worst.size()) fail("record " + std::to_string(i) + ": worst count differs");
  for (size_t k = 0; k < want.worst.size(); ++k) {
    field("worst.out", want.worst[k].out, got.worst[k].out);
    if (got.worst[k].index != want.worst[k].index) fail("record " + std::to_string(i) + ": worst index differs");
    if (!same(got.worst[k].got, want.worst[k].got) || !same(got.worst[k].want, want.worst[k].want))
      fail("record " + std::to_string(i) + ": worst value differs");
  }
  std::set<std::string> names;
  for (const auto& o : want.outputs) names.insert(sanitize_xml_text(o.out));
  if (names.size() != want.outputs.size()) return;  // duplicate names merge on reading
  if (got.outputs.size() != want.outputs.size()) fail("record " + std::to_string(i) + ": output count differs");
  for (size_t k = 0; k < want.outputs.size(); ++k) {
    const auto &a = want.outputs[k], &b = got.outputs[k];
    field("out", a.out, b.out);
    field("metric", a.metric, b.metric);
    if (a.elements != b.elements || a.mismatches != b.mismatches || !same(a.max_abs_err, b.max_abs_err) ||
        !same(a.max_rel_err, b.max_rel_err) || !same(a.bound, b.bound) || !same(a.lowp_err, b.lowp_err) ||
        !same(a.max_ratio, b.max_ratio) || !same(a.slope, b.slope) || !same(a.slope_lo, b.slope_lo) ||
        !same(a.slope_hi, b.slope_hi))
      fail("record " + std::to_string(i) + ": output '" + b.out + "' statistics differ");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_sanitize(std::string_view(reinterpret_cast<const char*>(data), size));

  FuzzedDataProvider fdp(data, size);
  const std::string suite = str(fdp, 24);
  std::vector<opcts::ResultRecord> records;
  const int n = fdp.ConsumeIntegralInRange<int>(0, 6);
  for (int k = 0; k < n && fdp.remaining_bytes() > 0; ++k) records.push_back(record(fdp));

  const std::string path = (opcts_fuzz::tmp_dir() / "junit.xml").string();
  opcts::write_junit(records, path, suite, opcts::JunitDetail::all);  // throws only on I/O failure: a crash here

  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string xml = ss.str();
  if (opcts::sanitize_xml_text(xml) != xml) fail("the JUnit file holds bytes that are not XML 1.0 text");

  pugi::xml_document doc;
  const auto res =
      doc.load_buffer(xml.data(), xml.size(), pugi::parse_default | pugi::parse_declaration, pugi::encoding_utf8);
  if (!res)
    fail(std::string("write_junit wrote malformed XML: ") + res.description() + " at byte " +
         std::to_string(res.offset));
  const auto root = doc.child("testsuites");
  if (!root) fail("no <testsuites>");
  if (root.attribute("tests").as_ullong() != records.size()) fail("<testsuites tests> differs from the record count");
  size_t cases = 0;
  for (auto s : root.children("testsuite"))
    cases += static_cast<size_t>(std::distance(s.children("testcase").begin(), s.children("testcase").end()));
  if (cases != records.size()) fail("testcase count differs from the record count");

  std::vector<opcts::ResultRecord> back;
  try {
    back = opcts::read_junit(path);
  } catch (const std::exception& e) {
    fail(std::string("read_junit rejects what write_junit wrote: ") + e.what());
  }
  if (back.size() != records.size()) fail("read_junit read a different number of records");
  std::vector<const opcts::ResultRecord*> order;
  for (const auto& r : records) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return family_of(*a) < family_of(*b); });
  for (size_t i = 0; i < order.size(); ++i) check_same(*order[i], back[i], i);
  return 0;
}
