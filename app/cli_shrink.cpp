// opcts shrink: a failing case shrunk to the smallest problem that fails the same way.
#include <cstdio>

#include "app/builtins.hpp"
#include "app/cli_commands.hpp"
#include "runner/shrink.hpp"

namespace opcts::cli {

int cmd_shrink(const std::string& id, const Selection& s, int device_flag, double seconds) {
  const int device = resolve_device(device_flag);
  const std::string arch = resolve_arch(s.arch, device);
  SuiteOptions so{s.cases_dir, s.catalogs, arch, s.manifest};
  so.plugins = s.plugins;
  Suite suite(loaded_registry_for(s.plugins), so);
  const ShrinkResult r = shrink_case(suite, id, device, seconds, [](const std::string& smaller) {
    std::printf("fails the same way: %s\n", smaller.c_str());
    std::fflush(stdout);
  });
  std::printf("%s  %s (%d candidates run%s)\n", r.shrunk == r.original ? "not shrunk" : "shrunk",
              failure_signature(r.record).c_str(), r.tried, r.out_of_time ? ", out of time" : "");
  std::printf("case   %s\nrepro  opcts repro '%s' --arch %s\n", r.shrunk.c_str(), r.shrunk.c_str(), arch.c_str());
  if (!r.record.message.empty()) std::printf("message %s\n", r.record.message.c_str());
  return r.shrunk == r.original ? 1 : 0;
}

}  // namespace opcts::cli
