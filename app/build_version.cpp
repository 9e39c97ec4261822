// The version and commit from the build's generated headers, where the build makes them.
#include "app/build_version.hpp"

#if __has_include("opcts_build_info.hpp")
#include "opcts_build_info.hpp"
#endif
#if __has_include("opcts_commit.hpp")
#include "opcts_commit.hpp"
#endif

namespace opcts::cli {

std::string opcts_version() {
#ifdef OPCTS_VERSION
  return OPCTS_VERSION;
#else
  return "unknown";
#endif
}

std::string opcts_commit() {
#ifdef OPCTS_GIT_COMMIT
  return OPCTS_GIT_COMMIT;
#else
  return "unknown";
#endif
}

}  // namespace opcts::cli
