// The CUDA indexing rows' callbacks: the ABI's parameter structs and tensors onto the kernels' IndexingArgs
// (indexing_kernels.hpp).
//
// A row's impl_data (IndexingRow) says which family's parameter struct it is handed. The index
// is checked before anything is launched: first_bad_index runs on a
// private stream and waits for it, the only way to answer with OPCTS_INVALID_ARGUMENT when run
// returns, since the stream the run was handed is held until then.
#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "families/indexing/cuda/indexing_kernels.hpp"
#include "families/indexing/cuda/indexing_launch.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts::cuda {

namespace {

const opcts_tensor* find(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (std::strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return nullptr;
}

bool value_of(opcts_dtype t, IdxValue& v) {
  if (t.code == OPCTS_DL_FLOAT && t.bits == 64) v = IdxValue::fp64;
  else if (t.code == OPCTS_DL_FLOAT && t.bits == 32) v = IdxValue::fp32;
  else if (t.code == OPCTS_DL_FLOAT && t.bits == 16) v = IdxValue::fp16;
  else if (t.code == OPCTS_DL_BFLOAT && t.bits == 16) v = IdxValue::bf16;
  else if (t.code == OPCTS_DL_INT && t.bits == 32) v = IdxValue::int32;
  else if (t.code == OPCTS_DL_INT && t.bits == 64) v = IdxValue::int64;
  else return false;
  return true;
}

// The fields the three parameter structs share, and index_add's alpha.
struct Common {
  opcts_dtype dtype, index;
  int64_t outer, n, m, inner;
  double alpha = 1;
  bool index_add = false;
};

template <class P>
Common fields_of(const P* p) {
  return {p->dtype, p->index, p->outer, p->n, p->m, p->inner};
}

Common common_of(const IndexingRow& row, const void* params) {
  switch (row.op) {
    case IndexingOp::index_add: {
      const auto* p = static_cast<const opcts_index_add_params*>(params);
      Common c = fields_of(p);
      c.alpha = p->alpha;
      c.index_add = true;
      return c;
    }
    case IndexingOp::index_select: return fields_of(static_cast<const opcts_index_select_params*>(params));
    case IndexingOp::scatter_add: break;
  }
  return fields_of(static_cast<const opcts_scatter_add_params*>(params));
}

}  // namespace

int32_t indexing_supports(const void* impl, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto* row = static_cast<const IndexingRow*>(impl);
  const Common c = common_of(*row, params);
  IdxValue v = IdxValue::fp32;
  if (!value_of(c.dtype, v)) return std::snprintf(reason, size, "unsupported value dtype"), 0;
  if (row->kernel == IndexingKernel::sorted && c.outer * c.m * c.inner >= (int64_t{1} << 32) - 1)
    return std::snprintf(reason, size, "keeps term positions in 32 bits: needs fewer than 2^32 terms"), 0;
  return 1;
}

int32_t indexing_deterministic(const void* impl, const void* params) {
  const auto* row = static_cast<const IndexingRow*>(impl);
  IdxValue v = IdxValue::fp32;
  value_of(common_of(*row, params).dtype, v);
  const bool integer = v == IdxValue::int32 || v == IdxValue::int64;
  // Float atomics add in arrival order; integer sums do not depend on it. The planted racy
  // sorted row claims determinism like the sorted row does (its bug).
  return row->kernel == IndexingKernel::sorted || row->kernel == IndexingKernel::gather || integer;
}

opcts_status indexing_run(const void* impl, const opcts_run_args* args, opcts_report* report) {
  const auto* row = static_cast<const IndexingRow*>(impl);
  const Common c = common_of(*row, args->params);
  IndexingArgs a;
  if (!value_of(c.dtype, a.value)) return report_status(report, OPCTS_UNSUPPORTED, "unsupported value dtype");
  a.index_type = c.index.bits == 32 ? IdxIndex::int32 : IdxIndex::int64;
  a.outer = c.outer;
  a.n = c.n;
  a.m = c.m;
  a.inner = c.inner;
  a.alpha = c.alpha;
  const opcts_tensor* index = find(args, "index");
  const opcts_tensor* out = find(args, "out");
  const opcts_tensor* input = find(args, "input");
  const opcts_tensor* self = find(args, "self");
  const opcts_tensor* terms = find(args, c.index_add ? "source" : "src");
  if (!index || !out) return report_status(report, OPCTS_INTERNAL, "missing the tensors index or out");
  a.index = index->data;
  a.out = out->data;
  if (row->kernel == IndexingKernel::gather) {
    if (!input) return report_status(report, OPCTS_INTERNAL, "cuda.gather runs index_select only (no tensor 'input')");
    a.input = input->data;
  } else {
    if (!self || !terms) return report_status(report, OPCTS_INTERNAL, "missing the tensors self or src / source");
    a.self = self->data;
    a.terms = terms->data;
    a.per_element_index = !c.index_add;
  }
  auto* stream = static_cast<CUstream_st*>(args->stream);
  try {
    if (const int64_t bad = first_bad_index(a); bad >= 0)
      return report_status(report, OPCTS_INVALID_ARGUMENT,
                           "index element " + std::to_string(bad) + " is outside [0, " + std::to_string(a.n) + ")",
                           "index");
    switch (row->kernel) {
      case IndexingKernel::atomic:
        scatter_atomic(a,
                       row->plant == IndexingPlant::pair_past_end ? AtomicPlant::pair_past_end
                       : row->plant == IndexingPlant::store       ? AtomicPlant::store
                                                                  : AtomicPlant::none,
                       stream);
        break;
      case IndexingKernel::warp_aggregated:
        scatter_warp_aggregated(a, row->plant == IndexingPlant::store, stream);
        break;
      case IndexingKernel::sorted:
        scatter_sorted(a,
                       row->plant == IndexingPlant::racy        ? SortedPlant::racy
                       : row->plant == IndexingPlant::dtype_acc ? SortedPlant::dtype_acc
                                                                : SortedPlant::none,
                       stream);
        break;
      case IndexingKernel::gather: gather(a, row->plant == IndexingPlant::offsets32, stream); break;
    }
  } catch (const std::exception& e) {
    return report_status(report, OPCTS_INTERNAL, e.what());
  }
  return OPCTS_OK;
}

}  // namespace opcts::cuda
