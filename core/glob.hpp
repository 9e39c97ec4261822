// Glob patterns: case and impl filters (--filter, --exclude), manifest entries' `match:`,
// tolerance rules' impl, arch and problem patterns.
#pragma once

#include <string>

namespace opcts {

/// fnmatch(3) without flags: '*' matches any run of characters, '/' included.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace opcts
