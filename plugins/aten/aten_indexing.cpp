// aten.scatter_add, aten.index_add, aten.index_select: Tensor.scatter_add_, Tensor.index_add_
// and torch.index_select along dim 1 of opcts's [outer, n, inner] views. out first receives self
// (one copy_), then PyTorch's in-place op adds into it, as `self.clone().scatter_add_(...)` does.
// Every index dtype is handed on: PyTorch decides what it takes. PyTorch's CUDA kernels accumulate
// floats with atomics, so float results are not deterministic.
#include "aten_common.hpp"

namespace opcts_aten {
namespace {

enum class Op { scatter_add, index_add, index_select };
const Op kScatter = Op::scatter_add, kIndexAdd = Op::index_add, kSelect = Op::index_select;

Op op_of(const void* d) { return *static_cast<const Op*>(d); }

bool integer(opcts_dtype t) { return t.code == OPCTS_DL_INT || t.code == OPCTS_DL_UINT; }

int32_t supports(const void*, const void*, const opcts_arch*, char*, size_t) { return 1; }

int32_t deterministic(const void* data, const void* params) {
  switch (op_of(data)) {
    case Op::scatter_add: return integer(static_cast<const opcts_scatter_add_params*>(params)->dtype);
    case Op::index_add: return integer(static_cast<const opcts_index_add_params*>(params)->dtype);
    case Op::index_select: return 1;
  }
  return 0;
}

// PyTorch's host-side wording for an index outside the dimension (its CUDA kernels check on the
// device instead: a device-side assert, a CRASH record). Narrow on purpose: "index" alone is in
// every one of these ops' messages.
const std::initializer_list<Phrase> kPhrases = {{"index out of range", "index"},
                                                {"out of bounds for dimension", "index"}};

opcts_status run(const void* data, const opcts_run_args* args, opcts_report* report) {
  return guarded_run(args, report, kPhrases, [&] {
    const int dev = args->device;
    at::Tensor out = wrap(need(args, "out"), dev);
    const at::Tensor index = wrap(need(args, "index"), dev);
    switch (op_of(data)) {
      case Op::scatter_add:
        out.copy_(wrap(need(args, "self"), dev));
        out.scatter_add_(1, index, wrap(need(args, "src"), dev));
        return;
      case Op::index_add: {
        const auto& p = *static_cast<const opcts_index_add_params*>(args->params);
        out.copy_(wrap(need(args, "self"), dev));
        const at::Scalar alpha = integer(p.dtype) ? at::Scalar(static_cast<int64_t>(p.alpha)) : at::Scalar(p.alpha);
        out.index_add_(1, index, wrap(need(args, "source"), dev), alpha);
        return;
      }
      case Op::index_select: out.copy_(at::index_select(wrap(need(args, "input"), dev), 1, index)); return;
    }
  });
}

}  // namespace

std::vector<ImplSpec> indexing_impls() {
  return {{"scatter_add", "aten.scatter_add", supports, run, deterministic, &kScatter},
          {"index_add", "aten.index_add", supports, run, deterministic, &kIndexAdd},
          {"index_select", "aten.index_select", supports, run, deterministic, &kSelect}};
}

}  // namespace opcts_aten
