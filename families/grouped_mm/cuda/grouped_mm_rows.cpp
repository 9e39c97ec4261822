// The CUDA grouped_mm rows: cuda.grouped_kernel, cuda.cublas_grouped and the planted
// cuda.grouped_kernel_<bug> (every build; rows.hpp).
//
// Planted (must FAIL): the kernel's own variants (grouped_mm_kernels.hpp GroupedPlant), each
// named after the bug class of families/grouped_mm/grouped_mm.hpp it plants and run only on problems that
// show it (planted_bug_cannot_show, plus what the kernel's tiling needs: a spill lands on the
// next row of the same 64-row tile, so a group must hold two rows).
#include <algorithm>

#include "families/grouped_mm/cuda/grouped_mm_launch.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts {

namespace {

std::string cuda_cannot_show(const grouped_mm::Problem& p, grouped_mm::PlantedBug bug) {
  std::string why = grouped_mm::planted_bug_cannot_show(p, bug);
  if (!why.empty() || bug != grouped_mm::PlantedBug::spill_past_n) return why;
  const std::vector<int64_t> s = grouped_mm::group_sizes(p);
  const int64_t rows = p.mode == grouped_mm::Mode::m2d_3d ? *std::max_element(s.begin(), s.end()) : p.m;
  return rows >= 2 ? "" : "the kernel's spill lands on the next row of a tile: needs a group of two rows";
}

}  // namespace

void register_cuda_grouped_mm(Registry& reg) {
  using namespace cuda;
  using grouped_mm::PlantedBug;
  static constexpr GroupedRow kKernel{false, GroupedPlant::none}, kCublas{true, GroupedPlant::none};
  struct Planted {
    const char* name;
    GroupedRow row;
    PlantedBug bug;
  };
  static constexpr Planted kPlanted[] = {
      {"cuda.grouped_kernel_stale_empty_group",
       {false, GroupedPlant::stale_empty_group},
       PlantedBug::stale_empty_group},
      {"cuda.grouped_kernel_tail_overwritten",
       {false, GroupedPlant::write_past_last_offset},
       PlantedBug::tail_overwritten},
      {"cuda.grouped_kernel_offs_as_starts", {false, GroupedPlant::offsets_as_starts}, PlantedBug::offs_as_starts},
      {"cuda.grouped_kernel_next_group_scales",
       {false, GroupedPlant::next_group_scales},
       PlantedBug::next_group_scales},
      {"cuda.grouped_kernel_spill_past_n", {false, GroupedPlant::spill_past_n}, PlantedBug::spill_past_n},
  };
  std::vector<Row> rows;
  auto add = [&](const char* name, const GroupedRow* data) {
    rows.push_back(
        row("grouped_mm", name, OPCTS_CUDA_ONLY(grouped_supports), OPCTS_CUDA_ONLY(grouped_run), nullptr, data));
    rows.back().caps = {"mma_sync_bf16"};
    rows.back().prepare = OPCTS_CUDA_ONLY(grouped_prepare);
  };
  add("cuda.grouped_kernel", &kKernel);
  rows.back() = with_hip_twin(std::move(rows.back()));
  add("cuda.cublas_grouped", &kCublas);
  for (const Planted& p : kPlanted) {
    add(p.name, &p.row);
    const PlantedBug bug = p.bug;
    rows.back().cannot_show = [bug](const Problem& pp) { return cuda_cannot_show(pp.as<grouped_mm::Problem>(), bug); };
  }
  add_rows(reg, std::move(rows));
}

}  // namespace opcts
