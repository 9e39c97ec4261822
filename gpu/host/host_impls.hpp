// Registration of the host device's implementations (app/builtins.cpp declares the
// register_host_<family> functions from the family list; the others are a family's own).
#pragma once

#include "core/family.hpp"

namespace opcts {
/// host.flash and its planted variants, then host.normalised_p_fp8 and its plant (sdpa).
void register_host_sdpa(Registry& reg);
/// The planted host.flash variants (sdpa): window_off_by_one, gqa_modulo, drop_rowsum, masked_row_nan,
/// pv_in_dtype, rowsum_in_dtype, lse_plus_log2.
void register_host_sdpa_planted(Registry& reg);
/// host.normalised_p_fp8, cuDNN's fp8 SDPA arithmetic, and its planted fp8_p_unscaled (sdpa).
void register_host_sdpa_normalised_p(Registry& reg);
/// host.cvt and the planted host.cvt_ties_up (cast).
void register_host_cast(Registry& reg);
/// host.emulated and its planted variants, then the Hopper emulation's (scaled_mm).
void register_host_scaled_mm(Registry& reg);
/// host.int4 and its planted variants (int4_mm).
void register_host_int4_mm(Registry& reg);
/// host.grouped and its planted variants (grouped_mm), ABI rows on the host backend.
void register_host_grouped_mm(Registry& reg);
/// host.emulated_hopper and its planted variants (scaled_mm_hopper.cpp).
void register_host_scaled_mm_hopper(Registry& reg);
/// host.emulated_split_k (split-K tactics) and its planted tactic (scaled_mm_split_k.cpp).
void register_host_scaled_mm_split_k(Registry& reg);
/// host.omp (scatter_add), host.omp_rows (index_add), host.gather (index_select), the planted
/// host.omp_drop_dups, host.omp_dtype_acc (each with an index_add twin _rows), host.omp_unstable
/// (scatter_add), and register_host_indexing_atomics's.
void register_host_indexing(Registry& reg);
/// host.atomic, host.warp_aggregated (and index_add's _rows): the CUDA kernels' arithmetic
/// emulated in order, and their planted lost-duplicate variants (indexing_atomic.cpp).
void register_host_indexing_atomics(Registry& reg);
}  // namespace opcts
