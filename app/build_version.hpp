// What this opcts is: its version and the commit it was built from, for the reports' selection.
#pragma once

#include <string>

namespace opcts::cli {

/// The project's version ("unknown" when the build does not say).
std::string opcts_version();
/// The source tree's git commit at build time ("unknown" outside a checkout).
std::string opcts_commit();

}  // namespace opcts::cli
