// The CUDA rows of scatter_add (cuda.atomic, cuda.warp_aggregated, cuda.sorted and the planted ones), index_add (the
// *_rows impls) and index_select (cuda.gather, planted cuda.gather_idx32); every build (rows.hpp).
//
// Impl names are unique over all families, so index_add's impls carry "_rows" (index_add adds
// whole rows picked by a 1-D index); their kernels are scatter_add's. The accumulation model
// each row declares is in cases/tolerances.yaml (cuda.atomic*: per_add, cuda.warp_aggregated*:
// warp32, cuda.sorted*: once). The planted *_store rows lose duplicates: the atomic kernel
// stores self + the term, the warp kernel's leader self + its group's sum.
#include "families/indexing/cuda/indexing_launch.hpp"
#include "families/indexing/indexing.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts {

namespace {

using cuda::IndexingKernel;
using cuda::IndexingOp;
using cuda::IndexingPlant;
using cuda::IndexingRow;

cuda::Row indexing_row(const char* family, const char* name, const IndexingRow* data) {
  return cuda::row(family, name, OPCTS_CUDA_ONLY(cuda::indexing_supports), OPCTS_CUDA_ONLY(cuda::indexing_run),
                   OPCTS_CUDA_ONLY(cuda::indexing_deterministic), data);
}

// `judged`: the model its tolerance rule declares (cases/tolerances.yaml), which decides where
// the bug can show.
cuda::Row planted_row(const char* family, const char* name, const IndexingRow* data, indexing::PlantedBug bug,
                      indexing::Accumulation judged) {
  cuda::Row r = indexing_row(family, name, data);
  r.cannot_show = [bug, judged](const Problem& p) {
    return indexing::planted_bug_cannot_show(p.as<indexing::Problem>(), bug, judged);
  };
  r.bug_needs_bitwise = bug == indexing::PlantedBug::unstable;
  return r;
}

constexpr IndexingRow kScatter[] = {
    {IndexingOp::scatter_add, IndexingKernel::atomic, IndexingPlant::none},
    {IndexingOp::scatter_add, IndexingKernel::warp_aggregated, IndexingPlant::none},
    {IndexingOp::scatter_add, IndexingKernel::sorted, IndexingPlant::none},
    {IndexingOp::scatter_add, IndexingKernel::atomic, IndexingPlant::pair_past_end},
    {IndexingOp::scatter_add, IndexingKernel::atomic, IndexingPlant::store},
    {IndexingOp::scatter_add, IndexingKernel::sorted, IndexingPlant::racy},
    {IndexingOp::scatter_add, IndexingKernel::sorted, IndexingPlant::dtype_acc},
    {IndexingOp::scatter_add, IndexingKernel::warp_aggregated, IndexingPlant::store},
};
constexpr IndexingRow kIndexAdd[] = {
    {IndexingOp::index_add, IndexingKernel::atomic, IndexingPlant::none},
    {IndexingOp::index_add, IndexingKernel::warp_aggregated, IndexingPlant::none},
    {IndexingOp::index_add, IndexingKernel::sorted, IndexingPlant::none},
    {IndexingOp::index_add, IndexingKernel::atomic, IndexingPlant::store},
    {IndexingOp::index_add, IndexingKernel::warp_aggregated, IndexingPlant::store},
};
constexpr IndexingRow kSelect[] = {
    {IndexingOp::index_select, IndexingKernel::gather, IndexingPlant::none},
    {IndexingOp::index_select, IndexingKernel::gather, IndexingPlant::offsets32},
};

}  // namespace

void register_cuda_indexing(Registry& reg) {
  using indexing::Accumulation;
  using indexing::PlantedBug;
  constexpr auto per_add = Accumulation::per_add, warp32 = Accumulation::warp32, once = Accumulation::once;
  cuda::add_rows(
      reg,
      {cuda::with_hip_twin(indexing_row("scatter_add", "cuda.atomic", &kScatter[0])),
       cuda::with_hip_twin(indexing_row("scatter_add", "cuda.warp_aggregated", &kScatter[1])),
       cuda::with_hip_twin(indexing_row("scatter_add", "cuda.sorted", &kScatter[2])),
       planted_row("scatter_add", "cuda.atomic_pair_past_end", &kScatter[3], PlantedBug::pair_past_end, per_add),
       planted_row("scatter_add", "cuda.atomic_store", &kScatter[4], PlantedBug::drop_duplicates, per_add),
       planted_row("scatter_add", "cuda.sorted_racy", &kScatter[5], PlantedBug::unstable, once),
       planted_row("scatter_add", "cuda.sorted_dtype_acc", &kScatter[6], PlantedBug::dtype_accumulation, once),
       planted_row("scatter_add", "cuda.warp_aggregated_store", &kScatter[7], PlantedBug::drop_duplicates, warp32)});
  cuda::add_rows(
      reg, {cuda::with_hip_twin(indexing_row("index_add", "cuda.atomic_rows", &kIndexAdd[0])),
            cuda::with_hip_twin(indexing_row("index_add", "cuda.warp_aggregated_rows", &kIndexAdd[1])),
            cuda::with_hip_twin(indexing_row("index_add", "cuda.sorted_rows", &kIndexAdd[2])),
            planted_row("index_add", "cuda.atomic_rows_store", &kIndexAdd[3], PlantedBug::drop_duplicates, per_add),
            planted_row("index_add", "cuda.warp_aggregated_rows_store", &kIndexAdd[4], PlantedBug::drop_duplicates,
                        warp32)});
  cuda::add_rows(reg, {cuda::with_hip_twin(indexing_row("index_select", "cuda.gather", &kSelect[0])),
                       planted_row("index_select", "cuda.gather_idx32", &kSelect[1], PlantedBug::index32, once)});
}

}  // namespace opcts
