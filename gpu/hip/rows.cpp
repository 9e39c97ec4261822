// The hip.* rows: opcts's portable kernels (gpu/portable/kernels.txt) on AMD GPUs, as
// rows of the backend "hip", registered in every build with the same ids (rows.hpp).
//
// hipcc builds these kernels (cmake/hip.cmake), but no build runs them yet: the ROCm runtime
// that would (a device, libamdhip64 with a GPU, an AbiBackend over hipMalloc/hipStream) is not
// on the machines opcts is built on, so every row is a SKIP naming that. The seam is the row:
// a HIP AbiBackend gives these rows callbacks (the gpu/cuda/*_impls.cpp glue built with
// hipcc), and a hipBLASLt adapter is a row like cuda.cublaslt (issue 15).
#include "gpu/cuda/rows.hpp"

namespace opcts {

/// Registers the hip.* rows of every family that has a portable kernel.
void register_hip_rows(Registry& reg) {
  using cuda::row;
  static const std::string missing =
      "no ROCm runtime in this build: hipcc compiles the portable kernels (OPCTS_HIP) but opcts runs them "
      "through no HIP backend yet";
  auto hip_row = [](const char* family, const char* name) {
    return row(family, name, nullptr, nullptr, nullptr, nullptr, "hip");
  };
  cuda::add_rows(reg,
                 {hip_row("sdpa", "hip.flash"), hip_row("cast", "hip.cvt"), hip_row("scaled_mm", "hip.mx_kernel"),
                  hip_row("int4_mm", "hip.int4_gemv"), hip_row("int4_mm", "hip.int4_mm"),
                  hip_row("grouped_mm", "hip.grouped_kernel"), hip_row("scatter_add", "hip.atomic"),
                  hip_row("scatter_add", "hip.warp_aggregated"), hip_row("scatter_add", "hip.sorted"),
                  hip_row("index_add", "hip.atomic_rows"), hip_row("index_add", "hip.warp_aggregated_rows"),
                  hip_row("index_add", "hip.sorted_rows"), hip_row("index_select", "hip.gather")},
                 missing);
}

}  // namespace opcts
