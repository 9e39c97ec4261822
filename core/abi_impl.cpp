// ABI descriptors as Impls, dtype codes, tensor descriptors and the host backend.
#include "core/abi_impl.hpp"

#include <algorithm>
#include <cstring>

#include "core/errors.hpp"
#include "core/output_guard.hpp"

namespace opcts {

namespace {

struct DtypeCode {
  DType t;
  uint8_t code, bits;
};

// DLPack v1.1 codes (dlpack.h DLDataTypeCode); ue4m3 has none and uses opcts's own.
constexpr DtypeCode kCodes[] = {
    {DType::fp64, OPCTS_DL_FLOAT, 64},
    {DType::fp32, OPCTS_DL_FLOAT, 32},
    {DType::fp16, OPCTS_DL_FLOAT, 16},
    {DType::bf16, OPCTS_DL_BFLOAT, 16},
    {DType::e4m3fn, OPCTS_DL_FLOAT8_E4M3FN, 8},
    {DType::e5m2, OPCTS_DL_FLOAT8_E5M2, 8},
    {DType::e4m3fnuz, OPCTS_DL_FLOAT8_E4M3FNUZ, 8},
    {DType::e5m2fnuz, OPCTS_DL_FLOAT8_E5M2FNUZ, 8},
    {DType::e8m0fnu, OPCTS_DL_FLOAT8_E8M0FNU, 8},
    {DType::ue4m3, OPCTS_DL_OPCTS_UE4M3, 8},
    {DType::e2m3fn, OPCTS_DL_FLOAT6_E2M3FN, 6},
    {DType::e3m2fn, OPCTS_DL_FLOAT6_E3M2FN, 6},
    {DType::e2m1fn, OPCTS_DL_FLOAT4_E2M1FN, 4},
    {DType::int4, OPCTS_DL_INT, 4},
    {DType::uint4, OPCTS_DL_UINT, 4},
    {DType::bool8, OPCTS_DL_BOOL, 8},
    {DType::int32, OPCTS_DL_INT, 32},
    {DType::int64, OPCTS_DL_INT, 64},
};

std::string c_text(const char* s) { return s ? std::string(s) : std::string(); }

}  // namespace

opcts_dtype abi_dtype(DType t) {
  for (const auto& c : kCodes)
    if (c.t == t) return {c.code, c.bits, 1};
  throw std::logic_error("dtype " + std::string(name(t)) + " has no ABI code");
}

std::optional<DType> dtype_of_abi(opcts_dtype t) {
  for (const auto& c : kCodes)
    if (c.code == t.code && c.bits == t.bits && t.lanes == 1) return c.t;
  return std::nullopt;
}

AbiArch::AbiArch(const ArchInfo& a) : name_(a.name), backend_(a.backend), caps_(a.caps.begin(), a.caps.end()) {
  for (const auto& c : caps_) cap_ptrs_.push_back(c.c_str());
  arch_.struct_size = sizeof(opcts_arch);
  arch_.name = name_.c_str();
  arch_.backend = backend_.c_str();
  arch_.compute_major = a.compute_major;
  arch_.compute_minor = a.compute_minor;
  arch_.warp_size = a.warp_size;
  arch_.smem_per_block_kib = a.smem_per_block_kib;
  arch_.caps = cap_ptrs_.data();
  arch_.n_caps = static_cast<int32_t>(cap_ptrs_.size());
}

void AbiTensors::add(const std::string& name, const HostTensor& t, bool is_output) {
  auto o = std::make_unique<Owned>(Owned{name, t.shape(), t.strides()});
  opcts_tensor d{};
  d.name = o->name.c_str();
  d.dtype = abi_dtype(t.dtype());
  d.ndim = static_cast<int32_t>(o->shape.size());
  d.shape = o->shape.data();
  d.strides = o->strides.data();
  d.packing = dtype_info(t.dtype()).bits == 4 ? OPCTS_PACKING_NIBBLES_LOW_FIRST : OPCTS_PACKING_NONE;
  d.is_output = is_output ? 1 : 0;
  owned_.push_back(std::move(o));
  descs_.push_back(d);
}

opcts_run_args AbiTensors::run_args(const void* params, void* stream, int device, const opcts_arch& arch,
                                    const char* tactic) {
  opcts_run_args a{};
  a.struct_size = sizeof a;
  a.params = params;
  a.tensors = descs_.data();
  a.n_tensors = static_cast<int32_t>(descs_.size());
  a.stream = stream;
  a.device = device;
  a.arch = &arch;
  a.tactic = tactic;
  return a;
}

void throw_abi_status(opcts_status s, const opcts_report& report, const std::string& who) {
  const std::string msg = who + ": " + std::string(report.message, strnlen(report.message, sizeof report.message));
  switch (s) {
    case OPCTS_OK: return;
    case OPCTS_INVALID_ARGUMENT:
      throw InvalidArgument(std::string(report.argument, strnlen(report.argument, sizeof report.argument)), msg);
    case OPCTS_UNSUPPORTED: throw Unsupported(msg);
    case OPCTS_INTERNAL: throw std::runtime_error(msg);
    case OPCTS_TACTIC_UNAVAILABLE: throw TacticUnavailable(msg);
  }
  throw std::runtime_error(who + ": unknown status " + std::to_string(static_cast<int>(s)) + " (" + msg + ")");
}

Support AbiBackend::fits(double, const std::string&) const { return Support::yes(); }

namespace {

// Host memory: the impl reads copies of the inputs (so one that writes into them cannot spoil
// the reference's inputs) and writes outputs poisoned with 0xFF bytes between guards
// (core/output_guard.hpp). The buffers of one run, or of one recording and its replays
// (--capture), whose addresses never change.
class HostBuffers {
 public:
  HostBuffers(const TensorMap& inputs, const std::vector<OutputSpec>& outs) : in_(inputs), outs_(outs) {
    for (auto& [name, t] : in_) tensors_.add(name, t, false);
    for (const auto& o : outs) {
      const HostTensor& t = shapes_.emplace(o.name, HostTensor(o.dtype, o.shape)).first->second;
      tensors_.add(o.name, t, true);
      layouts_.push_back(guard_layout(o, t.nbytes()));
      guarded_.push_back(guarded_image(o.dtype, layouts_.back(), kOutputPoison));
    }
    size_t i = 0;
    for (auto& [name, t] : in_) tensors_.descriptors()[i++].data = t.data();
    for (size_t k = 0; k < guarded_.size(); ++k)
      tensors_.descriptors()[i++].data = guarded_[k].data() + layouts_[k].before;
  }

  // One call of the impl's run on these buffers; its status thrown as the error it stands for.
  void call(const opcts_impl_desc& desc, const void* params, const opcts_arch& arch, int device, const char* tactic) {
    const opcts_run_args args = tensors_.run_args(params, nullptr, device, arch, tactic);
    opcts_report report{};
    const opcts_status s = desc.run(desc.impl_data, &args, &report);
    throw_abi_status(s, report, c_text(desc.name));
  }

  // The outputs as the last call left them, their guards checked (breaches as AbiBackend::run says).
  TensorMap outputs(const std::string& who, std::vector<GuardBreach>* breaches) const {
    TensorMap out = shapes_;
    for (size_t k = 0; k < outs_.size(); ++k) {
      HostTensor& t = out.at(outs_[k].name);
      if (const std::string breach = guard_breach(outs_[k].name, outs_[k].dtype, guarded_[k].data(), layouts_[k]);
          !breach.empty()) {
        const std::string what = who + " wrote outside its output: " + breach;
        if (!breaches) throw ContractBreach(FailureKind::written_outside, what, outs_[k].name);
        breaches->push_back({outs_[k].name, what});
      }
      std::memcpy(t.data(), guarded_[k].data() + layouts_[k].before, t.nbytes());
    }
    return out;
  }

  // Refuses an impl that wrote into an input: the buffers must still hold `inputs`.
  void check_inputs(const std::string& who, const TensorMap& inputs) const {
    for (const auto& [name, t] : inputs)
      if (std::memcmp(in_.at(name).data(), t.data(), t.nbytes()) != 0)
        throw ContractBreach(FailureKind::wrote_input,
                             who + " wrote into its input '" + name + "' (inputs are read-only)");
  }

  // --capture: `inputs` copied into the same input buffers, the outputs poisoned afresh.
  void reload(const TensorMap& inputs) {
    for (auto& [name, t] : in_) {
      const HostTensor& fresh = inputs.at(name);
      if (fresh.nbytes() != t.nbytes()) throw std::logic_error("reload: input '" + name + "' changed its size");
      std::memcpy(t.data(), fresh.data(), t.nbytes());
    }
    for (size_t k = 0; k < outs_.size(); ++k) {  // into the same storage: the descriptors point at it
      const std::vector<unsigned char> image = guarded_image(outs_[k].dtype, layouts_[k], kOutputPoison);
      std::copy(image.begin(), image.end(), guarded_[k].begin());
    }
  }

 private:
  TensorMap in_, shapes_;
  std::vector<OutputSpec> outs_;
  AbiTensors tensors_;
  std::vector<GuardLayout> layouts_;
  std::vector<std::vector<unsigned char>> guarded_;  // guard | misalign | output | guard
};

class HostBackend final : public AbiBackend {
 public:
  TensorMap run(const opcts_impl_desc& desc, const void* params, const TensorMap& inputs,
                const std::vector<OutputSpec>& outs, const opcts_arch& arch, int device, const char* tactic,
                std::string* /*note: every check applies on the host*/,
                std::vector<GuardBreach>* breaches) const override {
    HostBuffers b(inputs, outs);
    b.call(desc, params, arch, device, tactic);
    TensorMap out = b.outputs(c_text(desc.name), breaches);
    b.check_inputs(c_text(desc.name), inputs);
    return out;
  }

  // The host's equivalent of a graph (Impl::run_captured): the same buffers called three times.
  CapturedRun run_captured(const opcts_impl_desc& desc, const void* params, const TensorMap& capture_inputs,
                           const TensorMap& inputs, const std::vector<OutputSpec>& outs, const opcts_arch& arch,
                           int device, const char* tactic, std::string*,
                           std::vector<GuardBreach>* breaches) const override {
    const std::string who = c_text(desc.name);
    HostBuffers b(capture_inputs, outs);
    CapturedRun r;
    b.call(desc, params, arch, device, tactic);
    r.at_capture = b.outputs(who, breaches);
    b.check_inputs(who, capture_inputs);
    b.reload(inputs);
    b.call(desc, params, arch, device, tactic);
    r.first = b.outputs(who, breaches);
    b.reload(inputs);
    b.call(desc, params, arch, device, tactic);
    r.second = b.outputs(who, breaches);
    b.check_inputs(who, inputs);
    return r;
  }
};

}  // namespace

const AbiBackend& host_abi_backend() {
  static const HostBackend b;
  return b;
}

AbiImpl::AbiImpl(const opcts_impl_desc& desc, const AbiBackend* backend, std::string missing_backend)
    : family_(c_text(desc.family)),
      name_(c_text(desc.name)),
      backend_name_(c_text(desc.backend)),
      missing_(std::move(missing_backend)),
      planted_(desc.planted != 0),
      transport_(backend) {
  // A descriptor of an earlier minor version ends before the fields appended since: copy what
  // it has, the rest stays 0 (abi_minor 0).
  std::memcpy(&desc_, &desc, std::min<size_t>(desc.struct_size, sizeof desc_));
  desc_.struct_size = sizeof desc_;
  for (int32_t i = 0; i < desc.n_caps; ++i) caps_.push_back(c_text(desc.caps[i]));
  // The copies above outlive the caller's strings; the callbacks and impl_data stay the plugin's.
  desc_.family = family_.c_str();
  desc_.name = name_.c_str();
  desc_.backend = backend_name_.c_str();
  desc_.caps = nullptr;
  desc_.n_caps = 0;
}

Support AbiImpl::supports(const Problem& p, const ArchInfo& arch) const {
  if (std::string why = unavailable(); !why.empty()) return Support::no(std::move(why));
  if (cannot_show_)
    if (const std::string why = cannot_show_(p); !why.empty()) return Support::no(name_ + ": " + why);
  if (std::string why = abi_gap(p); !why.empty()) return Support::no(std::move(why));
  const std::vector<unsigned char> params = family_def().abi_params(p);
  if (params.empty()) return Support::no(name_ + ": family " + family_ + " has no ABI parameter struct");
  if (desc_.supports) {
    char reason[512] = {0};
    const AbiArch a(arch);
    if (!desc_.supports(desc_.impl_data, params.data(), &a.get(), reason, sizeof reason)) {
      const std::string why(reason, strnlen(reason, sizeof reason));
      return Support::no(name_ + ": " + (why.empty() ? std::string("not supported (no reason given)") : why));
    }
  }
  return transport_->fits(family_def().device_bytes(p), name_);
}

std::string AbiImpl::unavailable() const {
  if (!transport_) return name_ + ": " + missing_;
  const std::string why = transport_->unavailable();
  return why.empty() ? why : name_ + ": " + why;
}

std::string abi_gap_reason(const Family& f, const Problem& p, const std::string& impl, uint32_t declared) {
  const uint32_t needs = f.abi_minor(p);
  if (needs <= declared) return {};
  return impl + ": this problem needs plugin ABI 1." + std::to_string(needs) + " (" + f.abi_minor_feature(p) +
         "); the impl declares 1." + std::to_string(declared) + " (opcts_impl_desc.abi_minor)";
}

std::string AbiImpl::abi_gap(const Problem& p) const { return abi_gap_reason(family_def(), p, name_, desc_.abi_minor); }

void AbiImpl::check_runnable(const Problem& p) const {
  if (!transport_) throw std::logic_error(name_ + " is not runnable in this build: " + missing_);
  if (std::string why = abi_gap(p); !why.empty()) throw std::logic_error(why);  // never hand it a misread problem
}

namespace {
constexpr size_t kTacticNamesSize = OPCTS_TACTIC_NAMES_SIZE;
// The tactic as opcts_run_args carries it: null for a case without one (`held` keeps the text).
const char* tactic_arg(const RunContext& ctx, const std::string& held) {
  return ctx.tactic.empty() ? nullptr : held.c_str();
}
}  // namespace

TensorMap AbiImpl::run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const {
  check_runnable(p);
  const std::vector<unsigned char> params = family_def().abi_params(p);
  const AbiArch a(*ctx.arch);
  const std::string tactic(ctx.tactic);
  TensorMap out =
      transport_->run(desc_, params.data(), planted_inputs_ ? planted_inputs_(p, inputs) : inputs,
                      family_def().outputs(p), a.get(), ctx.device, tactic_arg(ctx, tactic), ctx.note, ctx.breaches);
  return planted_outputs_ ? planted_outputs_(p, std::move(out)) : out;
}

CapturedRun AbiImpl::run_captured(const Problem& p, const TensorMap& capture_inputs, const TensorMap& inputs,
                                  const RunContext& ctx) const {
  check_runnable(p);
  const std::vector<unsigned char> params = family_def().abi_params(p);
  const AbiArch a(*ctx.arch);
  const auto given = [&](const TensorMap& in) { return planted_inputs_ ? planted_inputs_(p, in) : in; };
  const std::string tactic(ctx.tactic);
  CapturedRun r =
      transport_->run_captured(desc_, params.data(), given(capture_inputs), given(inputs), family_def().outputs(p),
                               a.get(), ctx.device, tactic_arg(ctx, tactic), ctx.note, ctx.breaches);
  if (planted_outputs_)
    for (TensorMap* out : {&r.at_capture, &r.first, &r.second}) *out = planted_outputs_(p, std::move(*out));
  return r;
}

bool AbiImpl::deterministic(const Problem& p, std::string_view tactic) const {
  if (!desc_.deterministic && !deterministic_tactic_) return true;
  const std::vector<unsigned char> params = family_def().abi_params(p);
  if (params.empty()) return true;
  if (deterministic_tactic_) {
    const std::string t(tactic);
    return deterministic_tactic_(desc_.impl_data, params.data(), t.empty() ? nullptr : t.c_str()) != 0;
  }
  return desc_.deterministic(desc_.impl_data, params.data()) != 0;
}

std::vector<std::string> AbiImpl::tactics(const Problem& p) const {
  // A problem the impl must never be handed (a later ABI's) is one SKIP, not one per tactic.
  if (!abi_gap(p).empty()) return {};
  if (tactics_) return tactics_(p);
  if (!desc_.list_tactics) return {};
  const std::vector<unsigned char> params = family_def().abi_params(p);
  if (params.empty()) return {};
  std::vector<char> names(kTacticNamesSize, '\0');
  const int32_t n = desc_.list_tactics(desc_.impl_data, params.data(), names.data(), names.size());
  names.back() = '\0';
  std::vector<std::string> out;
  for (std::string_view rest(names.data()); !rest.empty();) {
    const auto nl = rest.find('\n');
    out.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }
  const auto bad = [&](const std::string& why) {
    return std::runtime_error(name_ + ": list_tactics on " + family_def().problem_id(p) + ": " + why);
  };
  if (n < 0) {  // names holds the impl's reason, or nothing (plugin.h)
    const std::string why(names.data(), strnlen(names.data(), 400));
    throw bad("returned " + std::to_string(n) + " (an error)" + (why.empty() ? "" : ": " + why));
  }
  if (static_cast<size_t>(n) != out.size())
    throw bad("returned " + std::to_string(n) + " but wrote " + std::to_string(out.size()) + " names");
  for (size_t i = 0; i < out.size(); ++i) {
    if (!is_tactic_name(out[i]))
      throw bad("'" + out[i] + "' is not a tactic name (1 to 32 of a-z, 0-9, _, a letter first)");
    for (size_t j = 0; j < i; ++j)
      if (out[j] == out[i]) throw bad("'" + out[i] + "' listed twice");
  }
  return out;
}

std::vector<InvarianceAxis> AbiImpl::invariant_axes(const Problem& p) const {
  if (!desc_.invariance) return {};
  const std::vector<unsigned char> params = family_def().abi_params(p);
  return params.empty() ? std::vector<InvarianceAxis>{}
                        : invariance_axes(desc_.invariance(desc_.impl_data, params.data()));
}

}  // namespace opcts
