// Guarded output layouts, their canary and the check of a run's guard bytes.
#include "core/output_guard.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace opcts {

namespace {

bool signed_zero_canary(DType t) {
  return t == DType::fp16 || t == DType::bf16 || t == DType::fp32 || t == DType::fp64;
}

// The canary byte at byte offset x from the tensor's start (negative before it): -0.0 is all
// zero bits but the sign, the top bit of an element's last byte (little-endian).
unsigned char canary(DType t, long long x) {
  if (!signed_zero_canary(t)) return kGuardByte;
  const long long es = storage_bytes(t);
  return ((x % es) + es) % es == es - 1 ? 0x80 : 0x00;
}

std::string hex(const unsigned char* p, size_t n) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%s%02x", i ? " " : "", p[i]);
    s += b;
  }
  return s;
}

}  // namespace

GuardLayout guard_layout(const OutputSpec& o, size_t tensor_bytes) {
  const long long es = storage_bytes(o.dtype);
  if (o.misalign_bytes < 0 || o.misalign_bytes % es != 0)
    throw std::logic_error("output '" + o.name + "': misalign_bytes " + std::to_string(o.misalign_bytes) +
                           " is not a multiple of its element size " + std::to_string(es));
  return {kGuardBytes + static_cast<size_t>(o.misalign_bytes), tensor_bytes, kGuardBytes};
}

std::vector<unsigned char> guarded_image(DType t, const GuardLayout& g, unsigned char poison) {
  std::vector<unsigned char> img(g.total(), poison);
  for (size_t i = 0; i < g.before; ++i)
    img[i] = canary(t, static_cast<long long>(i) - static_cast<long long>(g.before));
  for (size_t i = 0; i < g.after; ++i) img[g.before + g.tensor + i] = canary(t, static_cast<long long>(g.tensor + i));
  return img;
}

std::string guard_breach(const std::string& output, DType t, const unsigned char* buffer, const GuardLayout& g) {
  // The changed run of bytes nearest the tensor on each side, reported relative to it.
  auto region = [&](size_t from, size_t to, long long origin, bool before) -> std::string {
    size_t lo = to, hi = from;
    for (size_t i = from; i < to; ++i)
      if (buffer[i] != canary(t, static_cast<long long>(i) - origin)) {
        lo = std::min(lo, i);
        hi = std::max(hi, i + 1);
      }
    if (lo >= hi) return "";
    // Whole elements (the guards' offsets from the tensor are multiples of the element size):
    // a +0 that changed only the sign byte of a -0.0 shows as the element it wrote.
    const auto es = static_cast<size_t>(std::max<long long>(1, storage_bytes(t)));
    lo = from + (lo - from) / es * es;
    hi = std::min(to, from + (hi - from + es - 1) / es * es);
    std::vector<unsigned char> want(hi - lo);
    for (size_t i = lo; i < hi; ++i) want[i - lo] = canary(t, static_cast<long long>(i) - origin);
    const long long a = static_cast<long long>(lo) - origin, b = static_cast<long long>(hi) - origin;
    const size_t shown = std::min<size_t>(hi - lo, 8);
    char head[160];
    if (before) std::snprintf(head, sizeof head, "bytes [%lld, %lld) before the start of '%s'", a, b, output.c_str());
    else
      std::snprintf(head, sizeof head, "bytes [+%lld, +%lld) past the end of '%s'",
                    a - static_cast<long long>(g.tensor), b - static_cast<long long>(g.tensor), output.c_str());
    return std::string(head) + " hold " + hex(buffer + lo, shown) + (shown < hi - lo ? " ..." : "") +
           ", not the guard's " + hex(want.data(), shown) + (shown < hi - lo ? " ..." : "");
  };
  const auto origin = static_cast<long long>(g.before);
  std::string lo = region(0, g.before, origin, true);
  std::string hi = region(g.before + g.tensor, g.total(), origin, false);
  if (lo.empty()) return hi;
  return hi.empty() ? lo : lo + "; " + hi;
}

}  // namespace opcts
