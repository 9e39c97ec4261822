// The ATen plugin's glue (aten_common.hpp).
#include "aten_common.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

namespace opcts_aten {

std::string torch_version() { return TORCH_VERSION; }

const opcts_tensor* find(const opcts_run_args* args, const char* name) {
  for (int32_t i = 0; i < args->n_tensors; ++i)
    if (args->tensors[i].name && std::strcmp(args->tensors[i].name, name) == 0) return &args->tensors[i];
  return nullptr;
}

const opcts_tensor& need(const opcts_run_args* args, const char* name) {
  if (const opcts_tensor* t = find(args, name)) return *t;
  throw Refusal(OPCTS_INTERNAL, "", std::string("the run was handed no tensor '") + name + "'");
}

bool is(opcts_dtype t, int code, int bits) { return t.code == code && t.bits == bits && t.lanes == 1; }

at::ScalarType scalar_type(opcts_dtype t) {
  switch (t.code) {
    case OPCTS_DL_FLOAT:
      if (t.bits == 64) return at::kDouble;
      if (t.bits == 32) return at::kFloat;
      if (t.bits == 16) return at::kHalf;
      break;
    case OPCTS_DL_BFLOAT:
      if (t.bits == 16) return at::kBFloat16;
      break;
    case OPCTS_DL_INT:
      if (t.bits == 64) return at::kLong;
      if (t.bits == 32) return at::kInt;
      if (t.bits == 16) return at::kShort;
      if (t.bits == 8) return at::kChar;
      break;
    case OPCTS_DL_UINT:
      if (t.bits == 8) return at::kByte;
      break;
    case OPCTS_DL_BOOL:
      if (t.bits == 8) return at::kBool;
      break;
    case OPCTS_DL_FLOAT8_E4M3FN: return at::kFloat8_e4m3fn;
    case OPCTS_DL_FLOAT8_E5M2: return at::kFloat8_e5m2;
    case OPCTS_DL_FLOAT8_E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case OPCTS_DL_FLOAT8_E5M2FNUZ: return at::kFloat8_e5m2fnuz;
    case OPCTS_DL_FLOAT8_E8M0FNU: return at::kFloat8_e8m0fnu;
    default: break;
  }
  throw Refusal(OPCTS_UNSUPPORTED, "",
                "PyTorch " + torch_version() + " has no tensor dtype for DLPack code " + std::to_string(t.code) +
                    " with " + std::to_string(t.bits) + " bits");
}

at::Tensor wrap(const opcts_tensor& t, int device) {
  const std::vector<int64_t> shape(t.shape, t.shape + t.ndim), strides(t.strides, t.strides + t.ndim);
  const auto options = at::TensorOptions().dtype(scalar_type(t.dtype)).device(at::Device(at::kCUDA, device));
  // An empty tensor has no memory to alias (opcts may hand no device pointer for it), and
  // from_blob checks the pointer's device: an empty CUDA tensor of the shape is the same tensor.
  int64_t elements = 1;
  for (int64_t s : shape) elements *= s;
  if (elements == 0) return at::empty(shape, options);
  return at::from_blob(t.data, shape, strides, options);
}

at::Tensor wrap_as(const opcts_tensor& t, int device, at::ScalarType type, std::vector<int64_t> shape) {
  int64_t elements = 1, want = 1;
  for (int32_t i = 0; i < t.ndim; ++i) elements *= t.shape[i];
  for (int64_t s : shape) want *= s;
  const int64_t bytes =
      t.packing == OPCTS_PACKING_NIBBLES_LOW_FIRST ? (elements + 1) / 2 : elements * (t.dtype.bits / 8);
  if (bytes != want * static_cast<int64_t>(c10::elementSize(type)))
    throw Refusal(OPCTS_INTERNAL, "",
                  std::string("tensor '") + t.name + "' holds " + std::to_string(bytes) + " bytes, not the " +
                      std::to_string(want * static_cast<int64_t>(c10::elementSize(type))) + " its view needs");
  return at::from_blob(t.data, shape, at::TensorOptions().dtype(type).device(at::Device(at::kCUDA, device)));
}

namespace {

std::optional<c10::OperatorHandle> lookup(const char* op, const char* overload) {
  return c10::Dispatcher::singleton().findSchema(c10::OperatorName(op, overload));
}

std::string spelled(const char* op, const char* overload) {
  return std::string(op) + (overload && *overload ? std::string(".") + overload : std::string());
}

}  // namespace

bool has(const char* op, const char* overload, const char* argument) {
  const auto handle = lookup(op, overload);
  if (!handle) return false;
  if (!argument) return true;
  for (const c10::Argument& a : handle->schema().arguments())
    if (a.name() == argument) return true;
  return false;
}

std::vector<c10::IValue> call(const char* op, const char* overload, const NamedArgs& args) {
  const auto handle = lookup(op, overload);
  if (!handle)
    throw Refusal(OPCTS_UNSUPPORTED, "", "PyTorch " + torch_version() + " has no operator " + spelled(op, overload));
  const c10::FunctionSchema& schema = handle->schema();
  std::set<std::string> used;
  torch::jit::Stack stack;
  for (const c10::Argument& a : schema.arguments()) {
    const auto given = std::find_if(args.begin(), args.end(), [&](const auto& kv) { return kv.first == a.name(); });
    if (given != args.end()) {
      stack.push_back(given->second);
      used.insert(a.name());
    } else if (a.default_value()) {
      stack.push_back(*a.default_value());
    } else {
      std::ostringstream s;
      s << schema;
      throw Refusal(OPCTS_UNSUPPORTED, "",
                    "the adapter gives no '" + a.name() + "' to " + s.str() + " (PyTorch " + torch_version() + ")");
    }
  }
  for (const auto& kv : args)
    if (!used.count(kv.first)) {
      std::ostringstream s;
      s << schema;
      throw Refusal(OPCTS_UNSUPPORTED, "",
                    "PyTorch " + torch_version() + "'s " + s.str() + " has no argument '" + kv.first + "'");
    }
  handle->callBoxed(&stack);
  return std::vector<c10::IValue>(stack.begin(), stack.end());
}

namespace {

void fill(opcts_report* report, const std::string& argument, const std::string& message) {
  std::snprintf(report->argument, sizeof report->argument, "%s", argument.c_str());
  std::snprintf(report->message, sizeof report->message, "%s", message.c_str());
}

}  // namespace

Refusal refusal(const std::string& message, std::initializer_list<Phrase> phrases) {
  const std::string said = "PyTorch " + torch_version() + " refused it: " + message;
  for (const Phrase& p : phrases)
    if (message.find(p.needle) != std::string::npos) return Refusal(OPCTS_INVALID_ARGUMENT, p.argument, said);
  return Refusal(OPCTS_UNSUPPORTED, "", said);
}

opcts_status guarded_run(const opcts_run_args* args, opcts_report* report, std::initializer_list<Phrase> phrases,
                         const std::function<void()>& body) {
  try {
    const auto device = static_cast<c10::DeviceIndex>(args->device < 0 ? 0 : args->device);
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(args->stream), device));
    body();
    return OPCTS_OK;
  } catch (const Refusal& r) {
    fill(report, r.argument, r.what());
    return r.status;
  } catch (const c10::Error& e) {
    const Refusal r = refusal(e.what_without_backtrace(), phrases);
    fill(report, r.argument, r.what());
    return r.status;
  } catch (const std::exception& e) {
    fill(report, "", std::string("the ATen adapter failed: ") + e.what());
    return OPCTS_INTERNAL;
  }
}

int32_t skip(char* reason, size_t size, const std::string& why) {
  if (reason && size) std::snprintf(reason, size, "%s", why.c_str());
  return 0;
}

bool has_cap(const opcts_arch& arch, const char* cap) {
  for (int32_t i = 0; i < arch.n_caps; ++i)
    if (arch.caps[i] && std::strcmp(arch.caps[i], cap) == 0) return true;
  return false;
}

}  // namespace opcts_aten
