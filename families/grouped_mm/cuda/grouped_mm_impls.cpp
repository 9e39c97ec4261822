// The CUDA grouped_mm rows' callbacks: the ABI's tensors onto cuda.grouped_kernel / cuda.cublas_grouped, launched on
// the stream handed in.
//
// Thin on purpose: the launchers check every argument (grouped_mm_args.cu), the offsets' values
// included; the backend (abi_backend.cpp) uploads, poisons out, guards it on both sides and
// downloads it, so rows past the last offset are judged untouched.
#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <string>

#include "families/grouped_mm/cuda/grouped_mm_launch.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts::cuda {

int32_t grouped_supports(const void* impl, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto* row = static_cast<const GroupedRow*>(impl);
  const auto* p = static_cast<const opcts_grouped_mm_params*>(params);
  GroupedMode mode;
  GroupedRecipe recipe;
  try {
    mode = grouped_mode(p->mode);
    recipe = grouped_recipe(p->recipe);
  } catch (const AbiValueError& e) {
    std::snprintf(reason, size, "%s", e.what());  // a later version's recipe, or a corrupted struct
    return 0;
  }
  if (p->recipe == abi_value(grouped_mm::Recipe::rowwise_fnuz)) {
    std::snprintf(reason, size, "FNUZ elements are AMD gfx942 formats; CUDA has no FNUZ matmul");
    return 0;
  }
  if (!(row->cublas ? OPCTS_CUDA_VENDOR_OR(cublas_grouped_takes(mode, recipe), false)
                    : grouped_kernel_takes(mode, recipe))) {
    std::snprintf(
        reason, size, "%s",
        row->cublas ? "cuBLAS grouped GEMM has no scaled recipe (bf16 only)" : "does not take this mode and recipe");
    return 0;
  }
  if (row->cublas) {
    // Whether cuBLAS can be set up at all (a SKIP with its reason if not). This runs in the
    // parent process; the worker makes its own in grouped_prepare.
    try {
      OPCTS_CUDA_VENDOR(cublas_grouped_context());
    } catch (const std::exception& e) {
      std::snprintf(reason, size, "cuBLAS: %s", e.what());
      return 0;
    }
  }
  return 1;
}

void grouped_prepare(const void* impl, const void*, const char*) {
  if (!static_cast<const GroupedRow*>(impl)->cublas) return;
  try {
    OPCTS_CUDA_VENDOR(cublas_grouped_context());
  } catch (const std::exception&) {
    // Left to the run, which asks again and reports what failed.
  }
}

opcts_status grouped_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const auto* row = static_cast<const GroupedRow*>(impl);
  const auto* p = static_cast<const opcts_grouped_mm_params*>(a->params);
  GroupedMmParams k;
  try {
    k = grouped_kernel_params(*p, a->tensors, a->n_tensors, row->plant);
  } catch (const AbiValueError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.field);
  }
  auto* stream = static_cast<cudaStream_t>(a->stream);
  try {
    if (row->cublas) OPCTS_CUDA_VENDOR(grouped_mm_cublas(k, stream, cublas_grouped_context()));
    else grouped_mm_kernel(k, stream);
  } catch (const GroupedArgumentError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const std::exception& e) {
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  return OPCTS_OK;
}

}  // namespace opcts::cuda
