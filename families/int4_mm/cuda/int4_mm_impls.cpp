// The CUDA int4_mm rows' callbacks: the ABI's tensors onto int4_gemv / int4_mm, launched on the stream handed in.
//
// Thin on purpose: the kernels' launchers check every argument (int4_mm_args.cu) from the sizes
// the descriptors carry; the backend (abi_backend.cpp) uploads, poisons y, guards it on both
// sides and downloads it.
#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <string>

#include "families/int4_mm/cuda/int4_mm_launch.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts::cuda {

namespace {

// The group sizes of the operator's contract; any other is a negative case the launcher refuses.
bool contract_group(int4_mm::Format format, int64_t g) {
  return format == int4_mm::Format::q4_0 ? g == 32 : g == 32 || g == 64 || g == 128 || g == 256;
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
  int4_mm::Format format;
  try {
    format = from_abi<int4_mm::Format>(p->format, "format");
  } catch (const AbiValueError& e) {
    std::snprintf(reason, size, "%s", e.what());
    return 0;
  }
  const Int4Format kf = as_kernel<Int4Format>(format);
  const bool takes = row->gemv ? int4_gemv_takes(kf, p->group_size) : int4_mm_takes(kf, p->group_size);
  if (contract_group(format, p->group_size) && !takes) {
    std::snprintf(reason, size, "does not take %s with group size %lld", std::string(enum_name(format)).c_str(),
                  static_cast<long long>(p->group_size));
    return 0;
  }
  return 1;
}

opcts_status int4_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const auto* row = static_cast<const Int4Row*>(impl);
  const auto* p = static_cast<const opcts_int4_mm_params*>(a->params);
  Int4MmParams k;
  try {
    k = int4_kernel_params(*p, a->tensors, a->n_tensors, row->plant);
  } catch (const AbiValueError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.field);
  }
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
    if (workspace) (void)cudaFreeAsync(workspace, stream);
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const std::exception& e) {
    if (workspace) (void)cudaFreeAsync(workspace, stream);
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  if (workspace) (void)cudaFreeAsync(workspace, stream);
  return OPCTS_OK;
}

}  // namespace opcts::cuda
