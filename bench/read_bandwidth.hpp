// A kernel that only reads a buffer: the bandwidth ceiling of any kernel that must read those
// bytes once (families/int4_mm/bench/int4_mm_bench.cpp's "read same" column).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace opcts::bench {

/// Launches on `stream` a grid that reads every 16-byte word of [p, p + bytes) once with
/// streaming loads (ld.global.cs) and writes one XOR of them per block to `sink` (at least
/// `read_all_blocks(sm_count, blocks_per_sm)` unsigned ints), so nothing is optimised away.
/// `p` must be 16-byte aligned and `bytes` a multiple of 16.
void read_all(const void* p, size_t bytes, unsigned* sink, int sm_count, int blocks_per_sm, cudaStream_t stream);

/// The grid read_all launches: sm_count × blocks_per_sm blocks.
inline int read_all_blocks(int sm_count, int blocks_per_sm) { return sm_count * blocks_per_sm; }

}  // namespace opcts::bench
