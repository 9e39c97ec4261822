// XXH3-128 digests of text and files.
#include "core/digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace opcts {

namespace {

std::string hex(XXH128_hash_t h) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string("xxh128:") + buf;
}

}  // namespace

std::string digest_of(std::string_view bytes) { return hex(XXH3_128bits(bytes.data(), bytes.size())); }

std::string file_digest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  char buf[1 << 16];
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    XXH3_128bits_update(&st, buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ok ? hex(XXH3_128bits_digest(&st)) : "";
}

}  // namespace opcts
