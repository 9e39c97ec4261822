// The callbacks of the CUDA indexing rows (families/indexing/cuda/indexing_impls.cpp, CUDA builds only).
#pragma once

#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// Which kernel a row runs and what it plants: a row's impl_data points to one (indexing_rows.cpp).
enum class IndexingOp { scatter_add, index_add, index_select };  // which opcts_*_params the row is handed
enum class IndexingKernel { atomic, warp_aggregated, sorted, gather };
// store: the atomic kernel stores self + the term, the warp kernel's leader self + the group's
// sum, instead of adding (a lost duplicate)
enum class IndexingPlant { none, pair_past_end, store, racy, dtype_acc, offsets32 };
struct IndexingRow {
  IndexingOp op;
  IndexingKernel kernel;
  IndexingPlant plant;
};

/// Every indexing row: supports (cuda.sorted needs fewer than 2^32 terms), run (the index
/// checked first: OPCTS_INVALID_ARGUMENT "index"), deterministic (integer sums, the sorted
/// rows and the gather; not float atomics).
int32_t indexing_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status indexing_run(const void* impl, const opcts_run_args* args, opcts_report* report);
int32_t indexing_deterministic(const void* impl, const void* params);

}  // namespace opcts::cuda
