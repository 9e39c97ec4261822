// Fuzzes load_catalogs (runner/catalog.hpp) with builtin_registry(): every family's YAML
// parser, grid expansion and problem ids. Beyond "no crash, no UB, no leak, no unexpected
// exception", every problem a catalog yields must have an id that its family's parse_id reads
// back to the same id (`opcts repro <id>` and case_from_id depend on it), and make_cases /
// supports() on the host arch must not throw.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/builtins.hpp"
#include "core/arch.hpp"
#include "fuzz/fuzz_util.hpp"
#include "runner/catalog.hpp"

namespace {

const opcts::ArchInfo& host_arch() {
  static const opcts::ArchTable table = opcts::ArchTable::load(OPCTS_SOURCE_CASES_DIR "/archs.yaml");
  return table.get("host");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opcts;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (opcts_fuzz::grid_points(bytes) > 20000) return -1;  // -1: libFuzzer keeps it out of the corpus
  const std::string file = opcts_fuzz::write_file("catalog.yaml", bytes);
  // Odd sizes go through the folder path (a folder holding just this file).
  const std::string arg = size % 2 ? opcts_fuzz::tmp_dir().string() : file;
  const Registry& reg = builtin_registry();
  std::vector<CatalogEntry> entries;
  if (!opcts_fuzz::accepts([&] { entries = load_catalogs(reg, {arg}); })) return 0;

  for (const auto& e : entries) {
    if (!e.family || !e.problem) opcts_fuzz::fail("entry without family or problem at " + e.source);
    const std::string id = e.family->problem_id(*e.problem);
    if (id != e.problem_id) opcts_fuzz::fail("problem_id not stable: '" + id + "' vs '" + e.problem_id + "'");
    ProblemPtr back;
    try {
      back = e.family->parse_id(id);
    } catch (const std::exception& ex) {
      opcts_fuzz::fail(std::string(e.family->name()) + " problem id '" + id + "' (" + e.source +
                       ") does not parse back: " + ex.what());
    }
    const std::string id2 = e.family->problem_id(*back);
    if (id2 != id)
      opcts_fuzz::fail(std::string(e.family->name()) + " problem id '" + id + "' parses back as '" + id2 + "'");
    (void)e.family->cost(*e.problem);
    (void)e.family->outputs(*e.problem);
    (void)e.family->expected_error(*e.problem);
    (void)case_seed(*e.family, *e.problem);
  }
  const auto cases = make_cases(reg, entries, host_arch(), /*include_planted=*/true);
  for (const auto& c : cases) (void)c.impl->supports(*c.problem, host_arch());
  (void)select_cases(cases, Tier::default_, {"*"}, {"*_causal*"});
  return 0;
}
