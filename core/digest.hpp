// Content digests for provenance: what a report says it ran (plugins, manifests, catalogs, the
// planned case ids) as XXH3-128, so that two reports can be told apart by what they ran from.
// Not a security hash: it tells changed files and other plans apart, it does not resist forgery.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opcts {

/// "xxh128:" and 32 hex digits of XXH3-128 over `bytes`.
std::string digest_of(std::string_view bytes);

/// digest_of a file's bytes, read in chunks (a plugin may be hundreds of MiB); "" when it
/// cannot be read.
std::string file_digest(const std::string& path);

}  // namespace opcts
