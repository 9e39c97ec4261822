// The CUDA int4_mm rows: the ABI's parameter struct and tensors as the kernels' Int4MmParams,
// and the rows' callbacks (families/int4_mm/cuda/int4_mm_impls.cpp, CUDA builds only).
#pragma once

#include <cstring>

#include "core/abi_enum.hpp"
#include "families/int4_mm/cuda/int4_mm_kernels.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// Which kernel a row runs and the bug it plants (impl_data of the int4_mm rows).
struct Int4Row {
  bool gemv;
  Int4Plant plant;
};

/// The kernel parameters of the ABI call: sizes from the parameter struct, the tensor sizes the
/// launchers check (x's shape, the weight's bytes, the scale and zero tensors' first two
/// dimensions) from the descriptors handed in, pointers from their data. y and the gemv's
/// workspace are the caller's. Throws AbiValueError naming "format" for a format the
/// ABI does not name.
inline Int4MmParams int4_kernel_params(const opcts_int4_mm_params& c, const opcts_tensor* t, int32_t n,
                                       Int4Plant plant) {
  Int4MmParams k;
  k.m = c.m;
  k.n = c.n;
  k.k = c.k;
  k.group_size = c.group_size;
  k.inner_k_tiles = c.inner_k_tiles;
  k.format = as_kernel<Int4Format>(from_abi<int4_mm::Format>(c.format, "format"));
  k.act = c.dtype.code == OPCTS_DL_BFLOAT ? Int4Act::bf16 : Int4Act::fp16;
  k.plant = plant;
  k.ldy = c.n;
  for (int32_t i = 0; i < n; ++i) {
    const opcts_tensor& d = t[i];
    int64_t elems = 1;
    for (int32_t j = 0; j < d.ndim; ++j) elems *= d.shape[j];
    const int64_t dim0 = d.ndim > 0 ? d.shape[0] : 0, dim1 = d.ndim > 1 ? d.shape[1] : 0;
    if (std::strcmp(d.name, "x") == 0) {
      k.x = d.data;
      k.x_rows = dim0;
      k.x_cols = dim1;
    } else if (std::strcmp(d.name, "weight") == 0) {
      k.weight = d.data;
      k.weight_bytes = elems * d.dtype.bits / 8;
    } else if (std::strcmp(d.name, "scale_and_zero") == 0 || std::strcmp(d.name, "scales") == 0) {
      k.scales = d.data;
      k.scale_groups = dim0;
      k.scale_cols = dim1;
    } else if (std::strcmp(d.name, "qzeros") == 0) {
      k.zeros = d.data;
      k.zero_groups = dim0;
      k.zero_cols = dim1;
    } else if (std::strcmp(d.name, "y") == 0) {
      k.y = d.data;
    }
  }
  return k;
}

int32_t int4_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status int4_run(const void* impl, const opcts_run_args* args, opcts_report* report);

}  // namespace opcts::cuda
