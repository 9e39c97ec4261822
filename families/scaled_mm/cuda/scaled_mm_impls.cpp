// The CUDA scaled_mm rows' callbacks: the ABI's tensors onto cuBLASLt (cuda.cublaslt and its
// planted variants) or opcts's own kernel (cuda.mx_kernel), launched on the stream handed in.
//
// The glue checks what a kernel cannot see, as torch._scaled_mm does before it calls cuBLASLt:
// each scale tensor's dtype and element count against the recipe's layout (plugin.h), found in
// the tensors it is handed. The launchers check the rest (K, leading dimensions, layouts) and
// cuBLASLt its own combinations (status 15 / 7 → OPCTS_UNSUPPORTED naming the status).
#include "gpu/portable/runtime.hpp"

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "families/scaled_mm/cuda/scaled_mm_launch.hpp"
#include "gpu/cuda/device_memory.hpp"
#include "gpu/cuda/rows.hpp"
#include "gpu/cuda/tactic_rank.hpp"

namespace opcts::cuda {

namespace {

bool has_cap(const opcts_arch* arch, const char* cap) {
  for (int32_t i = 0; i < arch->n_caps; ++i)
    if (std::strcmp(arch->caps[i], cap) == 0) return true;
  return false;
}

using scaled_mm::Recipe;

// The capability a recipe needs on the arch for cuBLASLt (cases/archs.yaml).
constexpr EnumMap<Recipe, const char*, 7> kRecipeCaps{{
    {Recipe::tensorwise, "fp8_ocp"},
    {Recipe::rowwise, "fp8_ocp"},
    {Recipe::blockwise_1x128_128x128, "blockwise_scaled_mm"},
    {Recipe::blockwise_1x128_1x128, "blockwise_scaled_mm"},
    {Recipe::mxfp8, "mx_block_scaled_mma"},
    {Recipe::mxfp4, "mx_block_scaled_mma"},
    {Recipe::nvfp4, "nvfp4"},
}};
static_assert(covers(kRecipeCaps), "every scaled_mm::Recipe names its capability");
int64_t out_bytes(const opcts_scaled_mm_params& c) { return c.out.bits / 8; }

// D's leading dimension for cuBLASLt: rows padded to 16 bytes (cuBLASLt docs, cublasLtMatmul FP8 requirements).
int64_t padded_ldd(const opcts_scaled_mm_params& c) {
  const int64_t per16 = 16 / out_bytes(c);
  return (c.n + per16 - 1) / per16 * per16;
}

// The scales of a scale mode for an operand of R rows and K columns (scaled_mm_kernels.hpp).
int64_t scale_count(MmScaleMode mode, int64_t rows, int64_t k) {
  const auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  switch (mode) {
    case MmScaleMode::scalar_f32: return 1;
    case MmScaleMode::outer_vec_f32: return rows;
    case MmScaleMode::vec128_f32: return rows * cdiv(k, 128);
    case MmScaleMode::blk128x128_f32: return cdiv(rows, 128) * cdiv(k, 128);
    case MmScaleMode::vec32_ue8m0: return cdiv(rows, 128) * 128 * cdiv(cdiv(k, 32), 4) * 4;  // 128x4 tiles
    case MmScaleMode::vec16_ue4m3: return cdiv(rows, 128) * 128 * cdiv(cdiv(k, 16), 4) * 4;
  }
  return 0;
}

uint8_t scale_code(MmScaleMode mode) {
  switch (mode) {
    case MmScaleMode::vec32_ue8m0: return OPCTS_DL_FLOAT8_E8M0FNU;
    case MmScaleMode::vec16_ue4m3: return OPCTS_DL_OPCTS_UE4M3;
    default: return OPCTS_DL_FLOAT;
  }
}

void check_scale(const opcts_run_args* a, const char* name, MmScaleMode mode, int64_t rows, int64_t k) {
  const opcts_tensor* t = nullptr;
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (std::strcmp(a->tensors[i].name, name) == 0) t = &a->tensors[i];
  if (!t) throw MmArgumentError(name, std::string(name) + " is missing");
  if (t->dtype.code != scale_code(mode) || (mode <= MmScaleMode::blk128x128_f32 && t->dtype.bits != 32))
    throw MmArgumentError(name, std::string(name) + " has the wrong dtype for the recipe's scales");
  int64_t count = 1;
  for (int32_t j = 0; j < t->ndim; ++j) count *= t->shape[j];
  const int64_t want = scale_count(mode, rows, k);
  if (count != want)
    throw MmArgumentError(name,
                          "expected " + std::to_string(want) + " scales in " + name + ", got " + std::to_string(count));
}

// The heuristic rank the case's tactic names: "h<rank>" (scaled_mm_rows.cpp's heuristic_tactics,
// cuda.cublaslt only; tactic_rank.hpp), 0 where the case has none.
int32_t heuristic_rank_of(const ScaledMmRow& row, const opcts_run_args* a) {
  static_assert(kMaxHeuristicTactics <= 10, "tactic names h0..h9: one digit");
  return tactic_rank(tactic_of(a), 'h', row.cublaslt ? kMaxHeuristicTactics : 0, "cuda scaled_mm");
}

}  // namespace

int32_t scaled_mm_row_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason,
                               size_t size) {
  const auto& row = *static_cast<const ScaledMmRow*>(impl);
  const auto& c = *static_cast<const opcts_scaled_mm_params*>(params);
  auto no = [&](const std::string& why) {
    std::snprintf(reason, size, "%s", why.c_str());
    return 0;
  };
  Recipe recipe;
  try {
    recipe = from_abi<Recipe>(c.recipe, "recipe");
  } catch (const AbiValueError& e) {
    return no(e.what());  // a later version's recipe, or a corrupted struct
  }
  MmElem e;
  if (!mm_elem_of(c.a_elem, &e) || !mm_elem_of(c.b_elem, &e))
    return no("FNUZ elements are AMD gfx942 formats; CUDA has no FNUZ matmul");
  // The kernel interface reads VEC32_UE8M0 / VEC16_UE4M3 scales in cuBLAS's swizzled layout
  // only (scaled_mm_kernels.hpp); a row-major case is a layout these impls do not take.
  if (scaled_mm::is_block_scaled(recipe) && c.scale_layout != OPCTS_MM_SCALES_SWIZZLED)
    return no("VEC32_UE8M0 / VEC16_UE4M3 scales are read only in the swizzled layout");
  if (!row.cublaslt) return 1;
  const char* cap = map_enum(kRecipeCaps, recipe);
  if (!has_cap(arch, cap))
    return no(std::string(enum_name(recipe)) + " needs capability '" + cap + "', which " + arch->name + " lacks");
  if (c.a_elem.code == OPCTS_DL_FLOAT8_E5M2 && c.b_elem.code == OPCTS_DL_FLOAT8_E5M2)
    return no("no e5m2 × e5m2 kernel (status 15 on sm90; PyTorch raises ValueError)");
  // fp8 takes only TN below sm_100: a SKIP. Packed fp4 must be TN everywhere: a non-TN fp4 call
  // is an argument error the adapter refuses, so it runs.
  const bool tn = c.a_row_major && c.b_col_major;
  if (!tn && !scaled_mm::is_fp4(recipe) && arch->compute_major > 0 && arch->compute_major < 10)
    return no(
        "FP8 matmul takes only the TN layout below sm_100 (CUBLAS_STATUS_NOT_SUPPORTED, status 15, on sm90; "
        "cuBLASLt docs, cublasLtMatmul FP8 requirements)");
  // The handle and workspace are made now, not under the backend's stream gate.
  OPCTS_CUDA_VENDOR(scaled_mm_cublaslt_prepare());
  // D with its rows padded to 16 bytes, beside the output the backend allocates.
  const Support s = fits_device_memory(static_cast<double>(c.m) * padded_ldd(c) * out_bytes(c), "padded D");
  return s.ok ? 1 : no(s.reason);
}

void scaled_mm_row_prepare(const void* impl, const void* params, const char*) {
  if (!static_cast<const ScaledMmRow*>(impl)->cublaslt) return;
  const auto& c = *static_cast<const opcts_scaled_mm_params*>(params);
  // The call run will make: D padded to 16-byte rows, a bias when the problem has one, the D
  // scale of an e4m3 output (a planted row that drops one asks the heuristic itself).
  [[maybe_unused]] ScaledMmParams k = mm_kernel_params(c);  // unused under HIP (no cuBLASLt)
  if (c.n * out_bytes(c) % 16 != 0 && c.m > 0) k.ldd = padded_ldd(c);
  OPCTS_CUDA_VENDOR(scaled_mm_cublaslt_plan(k, c.bias != 0, k.out == MmOut::e4m3));
}

opcts_status scaled_mm_row_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const auto& row = *static_cast<const ScaledMmRow*>(impl);
  const auto& c = *static_cast<const opcts_scaled_mm_params*>(a->params);
  auto* stream = static_cast<cudaStream_t>(a->stream);
  void* padded = nullptr;
  try {
    ScaledMmParams k = mm_kernel_params(c, a->tensors, a->n_tensors);
    k.heuristic_rank = heuristic_rank_of(row, a);
    check_scale(a, "a_scale", k.a_scale_mode, c.m, c.k);
    check_scale(a, "b_scale", k.b_scale_mode, c.n, c.k);
    for (int32_t i = 0; i < a->n_tensors; ++i)
      if (std::strcmp(a->tensors[i].name, "global_scale") == 0) {
        // The MX kernel reads it on the device, where a launch recorded into a CUDA graph finds
        // the replay's value (read on the host, the recording kept the capture-time one: measured
        // under --capture on the H200, the NVFP4 replays scaled by the capture-time g_A·g_B).
        // cuBLASLt takes alpha from host memory here (it has no NVFP4 on sm90): the inputs are on
        // the device before run is called (plugin.h), so a copy on the legacy stream reads them
        // without waiting on the stream this call was handed.
        if (!row.cublaslt) k.global_scale_dev = static_cast<const float*>(a->tensors[i].data);
        else if (cudaMemcpy(&k.global_scale, a->tensors[i].data, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
          throw std::runtime_error("cudaMemcpy of global_scale failed");
      }
    void* d = k.d;
    const int64_t row_bytes = c.n * out_bytes(c);
    const bool pad = row.cublaslt && row_bytes % 16 != 0 && c.m > 0;
    if (pad) {
      k.ldd = padded_ldd(c);
      if (cudaMallocAsync(&padded, static_cast<size_t>(c.m * k.ldd * out_bytes(c)), stream) != cudaSuccess)
        throw std::runtime_error("cudaMallocAsync of the padded D failed");
      k.d = padded;
    }
    row.cublaslt ? OPCTS_CUDA_VENDOR(scaled_mm_cublaslt(k, stream)) : scaled_mm_mx_kernel(k, stream);
    if (pad && cudaMemcpy2DAsync(d, static_cast<size_t>(row_bytes), padded, static_cast<size_t>(k.ldd * out_bytes(c)),
                                 static_cast<size_t>(row_bytes), static_cast<size_t>(c.m), cudaMemcpyDeviceToDevice,
                                 stream) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy2DAsync of the padded D failed");
  } catch (const MmArgumentError& e) {
    if (padded) (void)cudaFreeAsync(padded, stream);
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const AbiValueError& e) {
    if (padded) (void)cudaFreeAsync(padded, stream);
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.field);
  } catch (const MmLibraryRefusal& e) {
    if (padded) (void)cudaFreeAsync(padded, stream);
    return report_status(r, OPCTS_UNSUPPORTED, "cuBLASLt status " + std::to_string(e.status) + ": " + e.what());
  } catch (const RankAbsent& e) {
    if (padded) (void)cudaFreeAsync(padded, stream);
    return report_status(r, OPCTS_TACTIC_UNAVAILABLE, e.what());
  } catch (const std::exception& e) {
    if (padded) (void)cudaFreeAsync(padded, stream);
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  if (padded) (void)cudaFreeAsync(padded, stream);
  return OPCTS_OK;
}

}  // namespace opcts::cuda
