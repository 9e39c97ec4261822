// The CUDA int4_mm rows: cuda.int4_gemv, cuda.int4_mm and their planted variants (every build; rows.hpp).
#include "families/int4_mm/cuda/int4_mm_launch.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts {

void register_cuda_int4_mm(Registry& reg) {
  using namespace cuda;
  static constexpr Int4Row kGemv{true, Int4Plant::none}, kMm{false, Int4Plant::none};
  struct Planted {
    const char* name;
    Int4Row row;
    int4_mm::PlantedBug bug;
  };
  static constexpr Planted kPlanted[] = {
      {"cuda.int4_gemv_group0_scale", {true, Int4Plant::group0_scale}, int4_mm::PlantedBug::group0_scale},
      {"cuda.int4_gemv_nibble_swap", {true, Int4Plant::nibble_swap}, int4_mm::PlantedBug::nibble_swap},
      {"cuda.int4_gemv_gptq_z", {true, Int4Plant::gptq_z}, int4_mm::PlantedBug::gptq_z},
      {"cuda.int4_mm_zero_before_scale", {false, Int4Plant::zero_before_scale}, int4_mm::PlantedBug::zero_before_scale},
      {"cuda.int4_mm_drop_partial_k", {false, Int4Plant::drop_partial_k}, int4_mm::PlantedBug::drop_partial_k},
      // The precision bugs live in the mma kernel's planted instantiation (int4_mm.cu).
      {"cuda.int4_mm_drop_last_k", {false, Int4Plant::drop_last_k}, int4_mm::PlantedBug::drop_last_k},
      {"cuda.int4_mm_fp16_as_bf16", {false, Int4Plant::fp16_as_bf16}, int4_mm::PlantedBug::fp16_as_bf16},
      {"cuda.int4_mm_sum_in_dtype_64", {false, Int4Plant::sum_in_dtype_64}, int4_mm::PlantedBug::sum_in_dtype_64},
      {"cuda.int4_mm_split_k4_in_dtype", {false, Int4Plant::split_k4_in_dtype}, int4_mm::PlantedBug::split_k4_in_dtype},
  };
  std::vector<Row> rows;
  auto add = [&](const char* name, const Int4Row* data) {
    rows.push_back(row("int4_mm", name, OPCTS_CUDA_ONLY(int4_supports), OPCTS_CUDA_ONLY(int4_run), nullptr, data));
    rows.back().caps = {"mma_sync_bf16"};
  };
  add("cuda.int4_gemv", &kGemv);
  rows.back() = with_hip_twin(std::move(rows.back()));
  add("cuda.int4_mm", &kMm);
  rows.back() = with_hip_twin(std::move(rows.back()));
  for (const Planted& p : kPlanted) {
    add(p.name, &p.row);
    const int4_mm::PlantedBug bug = p.bug;
    rows.back().cannot_show = [bug](const Problem& pp) {
      return int4_mm::planted_bug_cannot_show(pp.as<int4_mm::Problem>(), bug);
    };
  }
  add_rows(reg, std::move(rows));
}

}  // namespace opcts
