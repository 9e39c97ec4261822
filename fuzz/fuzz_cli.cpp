// Fuzzes the command line (app/cli_parse.hpp): the input is argv after "opcts", arguments
// separated by NUL bytes. Parsing and the option checks made before a command touches a file
// (check_options) must end in a value, a CLI::ParseError or a std::invalid_argument naming
// the option, never a crash, UB or another exception; and what they accept is in range: a
// shard 1 <= i <= N <= kMaxShards, reruns 0..kMaxReruns, a positive finite timeout.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/cli_parse.hpp"
#include "fuzz/fuzz_util.hpp"
#include "judge/manifest.hpp"
#include "runner/shard_plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opcts;
  using namespace opcts::cli;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args{"opcts"};
  for (size_t at = 0; at <= bytes.size() && args.size() < 64;) {
    const size_t nul = std::min(bytes.find('\0', at), bytes.size());
    args.emplace_back(bytes.substr(at, nul - at));
    at = nul + 1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  CommandLine cl;
  const auto app = make_cli(cl);
  try {
    app->parse(static_cast<int>(args.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;  // a usage error (or --help): the CLI prints it and exits 2 (0)
  }
  int given = 0;
  // Every top-level subcommand of make_cli (app/cli_parse.cpp).
  for (const CLI::App* sub : {cl.list, cl.sample, cl.run, cl.resources, cl.repro, cl.shrink, cl.report, cl.gate_cmd,
                              cl.cache, cl.manifest, cl.probe, cl.ctest, cl.worker, cl.plugin_probe})
    given += static_cast<bool>(*sub);
  if (given != 1) opcts_fuzz::fail("parsed with " + std::to_string(given) + " subcommands, not one");
  if (*cl.report && !*cl.merge && !*cl.matrix && !*cl.times && !*cl.html && !*cl.tightness)
    opcts_fuzz::fail("report without its subcommand");
  bool ok = false;
  try {
    check_options(cl);
    ok = true;
  } catch (const std::invalid_argument&) {
  }
  if (!ok) return 0;
  if (*cl.list || *cl.run || *cl.gate_cmd || *cl.ctest) {
    const ShardSpec s = parse_shard(resolve_shard(cl.sel.shard));
    if (s.index < 1 || s.index > s.count || s.count > kMaxShards)
      opcts_fuzz::fail("shard out of range: " + cl.sel.shard);
  }
  if (*cl.run && (cl.rf.reruns < 0 || cl.rf.reruns > kMaxReruns || !(cl.rf.timeout > 0) ||
                  !std::isfinite(cl.rf.timeout) || !(cl.rf.ref_cache_max_gib > 0)))
    opcts_fuzz::fail("run flags out of range accepted");
  return 0;
}
