// A zero-filled byte buffer from calloc: HostTensor's storage.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace opcts {

/// n bytes, all zero at construction; copyable and movable. Why not std::vector<std::byte>:
/// the vector zeroes its bytes with a memset in the constructing thread, so a 1 GB input was
/// written twice (zeros, then the generator's codes) and all its page faults were taken by one
/// thread. calloc knows that glibc's chunks above the mmap threshold (32 MiB under
/// core/allocator.hpp's keep_freed_memory) are fresh pages the kernel zeroes at first touch,
/// and skips the memset: the pages are then first touched by the (parallel) fill that writes
/// them. A 1 GB bf16 index_select table, 2 threads, development machine: 480 → 250 ms.
/// Smaller chunks, reused from the heap, are zeroed by calloc as before. Throws std::bad_alloc.
class ZeroedBytes {
 public:
  ZeroedBytes() = default;
  explicit ZeroedBytes(size_t n) : n_(n) {
    if (n == 0) return;
    p_ = static_cast<std::byte*>(std::calloc(n, 1));
    if (!p_) throw std::bad_alloc();
  }
  ZeroedBytes(const ZeroedBytes& o) : n_(o.n_) {
    if (n_ == 0) return;
    p_ = static_cast<std::byte*>(std::malloc(n_));
    if (!p_) throw std::bad_alloc();
    std::memcpy(p_, o.p_, n_);
  }
  ZeroedBytes(ZeroedBytes&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  ZeroedBytes& operator=(ZeroedBytes o) noexcept {  // copy or move, then swap
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~ZeroedBytes() { std::free(p_); }

  std::byte* data() { return p_; }
  const std::byte* data() const { return p_; }
  size_t size() const { return n_; }
  std::byte& operator[](size_t i) { return p_[i]; }
  const std::byte& operator[](size_t i) const { return p_[i]; }

 private:
  std::byte* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace opcts
