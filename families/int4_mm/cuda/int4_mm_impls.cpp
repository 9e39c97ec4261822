// The CUDA int4_mm rows' callbacks: the ABI's tensors onto int4_gemv / int4_mm, launched on the stream handed in.
//
// Thin on purpose: the kernels' launchers check every argument (int4_mm_args.cu) from the sizes
// the descriptors carry; the backend (abi_backend.cpp) uploads, poisons y, guards it on both
// sides and downloads it.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "families/int4_mm/cuda/int4_mm_launch.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts::cuda {

namespace {

const char* format_name(int32_t f) {
  switch (f) {
    case OPCTS_INT4_TINYGEMM: return "tinygemm";
    case OPCTS_INT4_TINYGEMM_UNPACKED: return "tinygemm_unpacked";
    case OPCTS_INT4_AWQ: return "awq";
    case OPCTS_INT4_GPTQ: return "gptq";
    default: return "q4_0";
  }
}

// The group sizes of the operator's contract; any other is a negative case the launcher refuses.
bool contract_group(int32_t format, int64_t g) {
  return format == OPCTS_INT4_Q4_0 ? g == 32 : g == 32 || g == 64 || g == 128 || g == 256;
}

}  // namespace

int32_t int4_supports(const void* impl, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto* row = static_cast<const Int4Row*>(impl);
  const auto* p = static_cast<const opcts_int4_mm_params*>(params);
  if (row->gemv && p->m > kInt4GemvMaxM) {
    std::snprintf(reason, size, "the gemv takes M <= %lld (cuda.int4_mm takes larger M)",
                  static_cast<long long>(kInt4GemvMaxM));
    return 0;
  }
  // A valid configuration the kernel does not implement is a SKIP; one outside the contract
  // goes to the launcher, which must refuse it.
  Int4MmParams k;
  k.format = int4_kernel_params(*p, nullptr, 0, Int4Plant::none).format;
  const bool takes = row->gemv ? int4_gemv_takes(k.format, p->group_size) : int4_mm_takes(k.format, p->group_size);
  if (contract_group(p->format, p->group_size) && !takes) {
    std::snprintf(reason, size, "does not take %s with group size %lld", format_name(p->format),
                  static_cast<long long>(p->group_size));
    return 0;
  }
  return 1;
}

opcts_status int4_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const auto* row = static_cast<const Int4Row*>(impl);
  const auto* p = static_cast<const opcts_int4_mm_params*>(a->params);
  Int4MmParams k = int4_kernel_params(*p, a->tensors, a->n_tensors, row->plant);
  auto* stream = static_cast<cudaStream_t>(a->stream);
  void* workspace = nullptr;
  try {
    if (row->gemv) {
      k.workspace_bytes = int4_gemv_workspace_bytes(k);
      if (k.workspace_bytes &&
          cudaMallocAsync(&workspace, static_cast<size_t>(k.workspace_bytes), stream) != cudaSuccess)
        return report_status(r, OPCTS_INTERNAL, "cudaMallocAsync of the gemv workspace failed");
      k.workspace = workspace;
      int4_gemv(k, stream);
    } else {
      int4_mm(k, stream);
    }
  } catch (const Int4ArgumentError& e) {
    if (workspace) cudaFreeAsync(workspace, stream);
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const std::exception& e) {
    if (workspace) cudaFreeAsync(workspace, stream);
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  if (workspace) cudaFreeAsync(workspace, stream);
  return OPCTS_OK;
}

}  // namespace opcts::cuda
