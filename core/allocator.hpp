// Process-wide allocator tuning for the references' large, short-lived matrices (glibc malloc).
#pragma once

#include <cstdlib>  // defines __GLIBC__ (through <features.h>) before it is tested

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace opcts {

/// Call once at process start (the CLI, the benches). glibc serves an allocation above
/// M_MMAP_THRESHOLD (128 KiB, raised dynamically only to sizes freed before) with fresh
/// mmap'd pages, which the kernel zeroes at first touch, and returns them at free. The
/// references allocate and free matrices of 1–32 MiB per head, per group and per product,
/// so an SDPA reference spent 13–21% of its time in the kernel's clear_page (perf, 2-core
/// development machine, 2026-12-02). Here blocks up to 32 MiB (glibc's largest threshold on
/// 64-bit) come from the heap and freed memory stays for reuse, trimmed only above 1 GiB:
/// 60 sampled pytorch_sweep references 2.82–2.91 → 2.48–2.51 s, a scaled_mm m2048 n14336 k4096
/// reference 6.4–6.6 → 5.2–5.4 s, in one process each. No effect without glibc.
///
/// jemalloc 5.3 (Debian's, with dirty_decay_ms:-1 so that nothing is purged) was measured as
/// the allocator for blocks above 32 MiB and rejected (2026-12-03, development machine): it
/// halved index_select's inputs (3.80 → 1.73 s for every default-tier problem) and cut
/// grouped_mm's by a fifth, but an SDPA backward reference ran 1.5× slower (36 → 54 ms at
/// sq256 sk2048), faulting 4× as many pages: it serves the references' per-thread matrices from
/// fresh extents rather than the dirty ones it keeps, which it coalesces late. Any positive
/// decay time faulted 5× as many pages on int4_mm's inputs.
inline void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace opcts
