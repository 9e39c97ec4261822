// Fuzzes the suite loader (runner/suite.hpp) with whole case folders: the input is an archs
// table, a tolerance table, a manifest and catalogs, separated by NUL bytes, written as
// archs.yaml, tolerances.yaml, m.yaml and cat<i>.yaml of one folder. Beyond "no crash, no UB,
// no leak": a YAML error must name its file, line and column ("<folder>/<file>.yaml:L:C: "),
// and a suite that loads must answer every question a run asks of it (skip reasons, manifest
// matches, stale entries, tolerances of each output) without an undocumented exception.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "app/builtins.hpp"
#include "fuzz/fuzz_util.hpp"
#include "runner/suite.hpp"

namespace {

namespace fs = std::filesystem;

// The folder of this process, emptied for each input.
fs::path fresh_folder() {
  const fs::path dir = opcts_fuzz::tmp_dir() / "cases";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  return dir;
}

// Whether the first line of `what` reads "<path>.yaml:<line>:<column>: <message>". By hand, not
// std::regex: libstdc++'s matcher recurses once per character of a ".+", and a message that
// quotes a long scalar overflowed the stack of this ASan build (a CI finding, not a loader bug).
bool names_file_line_column(const std::string& message) {
  const std::string what = message.substr(0, message.find('\n'));
  const auto digits = [&](size_t& at) {
    const size_t from = at;
    while (at < what.size() && what[at] >= '0' && what[at] <= '9') ++at;
    return at > from;
  };
  for (size_t p = what.find(".yaml:", 1); p != std::string::npos; p = what.find(".yaml:", p + 1)) {
    size_t at = p + 6;
    if (digits(at) && at < what.size() && what[at++] == ':' && digits(at) && what.compare(at, 2, ": ") == 0 &&
        at + 2 < what.size())
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opcts;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (size_t at = 0; at <= bytes.size() && parts.size() < 8;) {
    const size_t nul = std::min(bytes.find('\0', at), bytes.size());
    parts.push_back(bytes.substr(at, nul - at));
    at = nul + 1;
  }
  if (parts.size() < 3) return -1;
  for (size_t i = 3; i < parts.size(); ++i)
    if (opcts_fuzz::grid_points(parts[i]) > 5000) return -1;
  const fs::path dir = fresh_folder();
  const auto put = [&](const std::string& name, std::string_view text) {
    std::ofstream(dir / name, std::ios::binary).write(text.data(), static_cast<std::streamsize>(text.size()));
  };
  put("archs.yaml", parts[0]);
  put("tolerances.yaml", parts[1]);
  put("m.yaml", parts[2]);
  for (size_t i = 3; i < parts.size(); ++i) put("cat" + std::to_string(i) + ".yaml", parts[i]);

  // The arch: the table's first, else host (whose absence is then the error).
  std::string arch = "host";
  opcts_fuzz::accepts([&] {
    const auto names = ArchTable::load((dir / "archs.yaml").string()).names();
    if (!names.empty()) arch = names.front();
  });
  SuiteOptions o{dir.string(), {}, arch, (dir / "m.yaml").string()};
  o.include_planted = size % 2;
  const Registry& reg = builtin_registry();
  std::unique_ptr<Suite> suite;
  try {
    suite = std::make_unique<Suite>(reg, o);
  } catch (const YamlError& e) {
    const std::string what = e.what();
    if (what.rfind(dir.string(), 0) != 0 || !names_file_line_column(what))
      opcts_fuzz::fail("YAML error without file:line:column: " + what.substr(0, 300));
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;  // an unknown arch, a manifest of another arch
  }
  std::vector<std::string> ids;
  for (const auto& c : suite->all_cases()) {
    if (ids.size() >= 2000) break;
    ids.push_back(c.id);
    (void)suite->skip_reason(c);
    (void)suite->manifest().find(EntryKind::xfail, c.id);
    (void)suite->manifest().find(EntryKind::flaky, c.id);
    for (const auto& out : c.family->outputs(*c.problem))
      opcts_fuzz::accepts([&] {
        (void)suite->tolerances().resolve(std::string(c.family->name()), out.name, out.dtype,
                                          std::string(c.impl->name()), arch, c.id, &suite->manifest());
      });
  }
  (void)suite->manifest().stale(ids);
  return 0;
}
