// The ATen plugin's glue: opcts tensors as ATen tensors without copies, PyTorch operators called
// by argument name, PyTorch's refusals translated into the plugin ABI's statuses.
//
// Every impl of this plugin calls a PyTorch operator as PyTorch's own Python frontend would
// (the `_scaled_dot_product_*_attention`, `_scaled_mm`, `_grouped_mm`, ... ops of
// aten/src/ATen/native/native_functions.yaml) on tensors that alias opcts's device buffers
// (`at::from_blob` with opcts's shapes and strides), on the stream opcts hands the run. What an
// operator returns in memory it allocated is copied into opcts's output with one `copy_` (exact:
// same dtype). The adapter decides nothing for PyTorch: an argument PyTorch accepts is passed on,
// a refusal PyTorch raises is reported (mapped to the ABI's argument names by the phrase tables
// in each family's file).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "opcts/plugin.h"

namespace opcts_aten {

/// "2.11.0+cu130": the PyTorch this plugin runs against (TORCH_VERSION at build time); skip
/// reasons and findings name it.
std::string torch_version();

/// A run that ends in a status other than OPCTS_OK: thrown by the glue and the impls, turned
/// into the ABI's report by `guarded_run`.
struct Refusal : std::runtime_error {
  Refusal(opcts_status s, std::string argument, const std::string& message)
      : std::runtime_error(message), status(s), argument(std::move(argument)) {}
  opcts_status status;
  std::string argument;
};

/// The tensor descriptor named `name` in the run's arguments, or nullptr.
const opcts_tensor* find(const opcts_run_args* args, const char* name);
/// As find; throws Refusal(OPCTS_INTERNAL) naming the tensor when it is absent.
const opcts_tensor& need(const opcts_run_args* args, const char* name);

/// The ATen dtype of an ABI dtype (fp64 ... e8m0fnu, ints, bool); throws Refusal(UNSUPPORTED)
/// for one ATen lacks (ue4m3, fp6, packed fp4).
at::ScalarType scalar_type(opcts_dtype t);
/// Whether an ABI dtype is `code`/`bits`.
bool is(opcts_dtype t, int code, int bits);

/// A CUDA tensor aliasing the descriptor's memory (no copy), with its shape and strides in
/// elements, on `device`.
at::Tensor wrap(const opcts_tensor& t, int device);
/// The descriptor's bytes as a contiguous tensor of `type` and `shape` (packed 4-bit codes read
/// as the words a kernel loads); throws Refusal(INTERNAL) if the sizes disagree.
at::Tensor wrap_as(const opcts_tensor& t, int device, at::ScalarType type, std::vector<int64_t> shape);

/// An operator argument by its schema name: a tensor, an undefined optional (c10::IValue()),
/// an int, a double, a bool, a list.
using NamedArgs = std::vector<std::pair<std::string, c10::IValue>>;

/// Calls `op` (e.g. "aten::_scaled_mm", overload "") through the dispatcher with the arguments
/// matched to its schema by name; arguments not given take the schema's defaults. Throws
/// Refusal(UNSUPPORTED) naming the PyTorch version if the operator does not exist, if a given
/// name is not in its schema, or a required one is missing. Returns the operator's outputs.
std::vector<c10::IValue> call(const char* op, const char* overload, const NamedArgs& args);
/// Whether this PyTorch has `op` (with `argument` in its schema, when given).
bool has(const char* op, const char* overload, const char* argument = nullptr);

/// A PyTorch refusal's wording and the ABI argument it names: if a c10::Error's message contains
/// `needle`, the run reports OPCTS_INVALID_ARGUMENT with `argument`.
struct Phrase {
  const char* needle;
  const char* argument;
};

/// PyTorch's refusal `message` as the Refusal guarded_run reports: OPCTS_INVALID_ARGUMENT naming
/// the first phrase whose needle the message contains, else OPCTS_UNSUPPORTED.
Refusal refusal(const std::string& message, std::initializer_list<Phrase> phrases);

/// Runs `body` on the stream in `args` (made PyTorch's current stream for the device) and maps
/// what it throws: Refusal as it says; a c10::Error whose message contains a phrase's needle to
/// OPCTS_INVALID_ARGUMENT naming the phrase's argument, any other c10::Error to
/// OPCTS_UNSUPPORTED ("PyTorch <version> refused: ..."); anything else to OPCTS_INTERNAL.
opcts_status guarded_run(const opcts_run_args* args, opcts_report* report, std::initializer_list<Phrase> phrases,
                         const std::function<void()>& body);

/// Writes `why` into a supports callback's reason buffer and returns 0 (a SKIP).
int32_t skip(char* reason, size_t size, const std::string& why);

/// Whether the arch declares the capability `cap` (a name of cases/archs.yaml, e.g. "fp8_fnuz").
bool has_cap(const opcts_arch& arch, const char* cap);

/// One impl of the plugin: what aten_plugin.cpp registers.
struct ImplSpec {
  const char* family;
  const char* name;
  opcts_supports_fn supports;
  opcts_run_fn run;
  opcts_deterministic_fn deterministic;  // may be null: always deterministic
  const void* data;
};

/// Each family file's impls.
std::vector<ImplSpec> sdpa_impls();
std::vector<ImplSpec> scaled_mm_impls();
std::vector<ImplSpec> grouped_mm_impls();
std::vector<ImplSpec> int4_mm_impls();
std::vector<ImplSpec> indexing_impls();
std::vector<ImplSpec> cast_impls();

}  // namespace opcts_aten
