// The callbacks of the CUDA cast rows (families/cast/cuda/cast_impls.cpp, CUDA builds only).
#pragma once

#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// cuda.cvt: CUDA's conversion intrinsics (cast_cvt.cu). impl_data: nullptr.
int32_t cvt_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status cvt_run(const void* impl, const opcts_run_args* args, opcts_report* report);
/// cuda.cvt_ties_up (planted): opcts's integer encoder rounding ties away from zero.
int32_t cvt_ties_up_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status cvt_ties_up_run(const void* impl, const opcts_run_args* args, opcts_report* report);
/// cuda.cvt_sync_in_run (planted): cuda.cvt's launch, then a wait for the stream it was handed
/// before returning (a launcher that reads a status back): what stream capture forbids.
opcts_status cvt_sync_in_run(const void* impl, const opcts_run_args* args, opcts_report* report);

}  // namespace opcts::cuda
