// `opcts --version`: what this binary is and how it was built (cmake/version.cmake).
#include "app/cli_parse.hpp"
#include "opcts_build_info.hpp"
#include "opcts_commit.hpp"
#include "runner/suite.hpp"

namespace opcts::cli {

std::string version_text() {
  return std::string("opcts ") + OPCTS_VERSION + " (commit " + OPCTS_GIT_COMMIT + ")\n" +  //
         "build:  " + OPCTS_BUILD_OPTIONS + "\n" +                                         //
         "CUDA:   " + OPCTS_BUILD_CUDA + "\n" +                                            //
         "cuDNN:  " + OPCTS_BUILD_CUDNN + "\n" +                                           //
         "HIP:    " + OPCTS_BUILD_HIP + "\n" +                                             //
         "cases:  " + default_cases_dir() + "\n";
}

}  // namespace opcts::cli
