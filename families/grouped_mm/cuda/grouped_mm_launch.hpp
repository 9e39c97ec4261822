// The CUDA grouped_mm rows: the ABI's parameter struct and tensors as the kernels' GroupedMmParams,
// and the rows' callbacks (families/grouped_mm/cuda/grouped_mm_impls.cpp, CUDA builds only).
#pragma once

#include <cstring>

#include "core/abi_enum.hpp"
#include "families/grouped_mm/cuda/grouped_mm_kernels.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// Which implementation a row runs and the bug it plants (impl_data of the grouped_mm rows).
struct GroupedRow {
  bool cublas;
  GroupedPlant plant;
};

/// The kernels' mode of the struct's; throws AbiValueError naming "mode" for a value the ABI
/// does not name.
inline GroupedMode grouped_mode(int32_t m) { return as_kernel<GroupedMode>(from_abi<grouped_mm::Mode>(m, "mode")); }

// ROWWISE_FNUZ has rowwise's argument contract (the launchers' checks); the kernel decodes
// e4m3fn, so the CUDA rows SKIP it before a launch (grouped_supports).
inline constexpr EnumMap<grouped_mm::Recipe, GroupedRecipe, 4> kGroupedRecipes{{
    {grouped_mm::Recipe::bf16, GroupedRecipe::bf16},
    {grouped_mm::Recipe::rowwise, GroupedRecipe::fp8_rowwise},
    {grouped_mm::Recipe::mxfp8, GroupedRecipe::mxfp8},
    {grouped_mm::Recipe::rowwise_fnuz, GroupedRecipe::fp8_rowwise},
}};
static_assert(covers(kGroupedRecipes), "every grouped_mm::Recipe has its kernel recipe");

/// The kernels' recipe of the struct's; throws AbiValueError naming "recipe" for a value the
/// ABI does not name.
inline GroupedRecipe grouped_recipe(int32_t r) {
  return map_enum(kGroupedRecipes, from_abi<grouped_mm::Recipe>(r, "recipe"));
}

/// The kernel parameters of the ABI call: mode, recipe and G from the parameter struct; every
/// size from the descriptors handed in (the launchers check them against each other and against
/// G); pointers from their data. "b" is Bᵀ (K contiguous), so its last dimension is K and the one
/// before it N: the header's logical B [b_batch, K, N] with ldb = K. Throws AbiValueError for a
/// mode or recipe the ABI does not name.
inline GroupedMmParams grouped_kernel_params(const opcts_grouped_mm_params& c, const opcts_tensor* t, int32_t n,
                                             GroupedPlant plant) {
  GroupedMmParams k;
  k.mode = grouped_mode(c.mode);
  k.recipe = grouped_recipe(c.recipe);
  k.groups = c.groups;
  k.plant = plant;
  for (int32_t i = 0; i < n; ++i) {
    const opcts_tensor& d = t[i];
    int64_t elems = 1;
    for (int32_t j = 0; j < d.ndim; ++j) elems *= d.shape[j];
    const bool three = d.ndim == 3;
    const int64_t batch = three ? d.shape[0] : 0, rows = d.ndim >= 2 ? d.shape[d.ndim - 2] : 0,
                  cols = d.ndim >= 1 ? d.shape[d.ndim - 1] : 0;
    if (std::strcmp(d.name, "a") == 0) {
      k.a = d.data;
      k.a_batch = batch;
      k.a_rows = rows;
      k.a_cols = cols;
    } else if (std::strcmp(d.name, "b") == 0) {
      k.b = d.data;
      k.b_batch = batch;
      k.b_rows = cols;  // K
      k.b_cols = rows;  // N
    } else if (std::strcmp(d.name, "offs") == 0) {
      k.offs = static_cast<const int32_t*>(d.data);
      k.offs_count = elems;
    } else if (std::strcmp(d.name, "a_scale") == 0) {
      k.a_scale = d.data;
      k.a_scale_count = elems;
    } else if (std::strcmp(d.name, "b_scale") == 0) {
      k.b_scale = d.data;
      k.b_scale_count = elems;
    } else if (std::strcmp(d.name, "out") == 0) {
      k.out = d.data;
      k.out_batch = batch;
      k.out_rows = rows;
      k.out_cols = cols;
    }
  }
  return k;
}

int32_t grouped_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status grouped_run(const void* impl, const opcts_run_args* args, opcts_report* report);
/// Row::prepare: cuda.cublas_grouped's cuBLAS handle and workspace, made in the worker before
/// the backend holds the stream (cublasCreate loads cuBLAS's libraries, which waits for the
/// device); nothing for the kernel rows.
void grouped_prepare(const void* impl, const void* params, const char* tactic);

}  // namespace opcts::cuda
