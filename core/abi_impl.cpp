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

void throw_abi_status(opcts_status s, const opcts_report& report, const std::string& who) {
  const std::string msg = who + ": " + std::string(report.message, strnlen(report.message, sizeof report.message));
  switch (s) {
    case OPCTS_OK: return;
    case OPCTS_INVALID_ARGUMENT:
      throw InvalidArgument(std::string(report.argument, strnlen(report.argument, sizeof report.argument)), msg);
    case OPCTS_UNSUPPORTED: throw Unsupported(msg);
    case OPCTS_INTERNAL: throw std::runtime_error(msg);
  }
  throw std::runtime_error(who + ": unknown status " + std::to_string(static_cast<int>(s)) + " (" + msg + ")");
}

Support AbiBackend::fits(double, const std::string&) const { return Support::yes(); }

namespace {

// Host memory: the impl reads copies of the inputs (so one that writes into them cannot spoil
// the reference's inputs) and writes outputs poisoned with 0xFF bytes between guards
// (core/output_guard.hpp).
class HostBackend final : public AbiBackend {
 public:
  TensorMap run(const opcts_impl_desc& desc, const void* params, const TensorMap& inputs,
                const std::vector<OutputSpec>& outs, const opcts_arch& arch, int device,
                std::string* /*note: every check applies on the host*/,
                std::vector<GuardBreach>* breaches) const override {
    TensorMap in_copy = inputs;
    TensorMap out;
    AbiTensors tensors;
    std::vector<GuardLayout> layouts;
    std::vector<std::vector<unsigned char>> guarded;  // guard | misalign | output | guard
    for (auto& [name, t] : in_copy) tensors.add(name, t, false);
    for (const auto& o : outs) {
      const HostTensor& t = out.emplace(o.name, HostTensor(o.dtype, o.shape)).first->second;
      tensors.add(o.name, t, true);
      layouts.push_back(guard_layout(o, t.nbytes()));
      guarded.push_back(guarded_image(o.dtype, layouts.back(), kOutputPoison));
    }
    size_t i = 0;
    for (auto& [name, t] : in_copy) tensors.descriptors()[i++].data = t.data();
    for (size_t k = 0; k < guarded.size(); ++k) tensors.descriptors()[i++].data = guarded[k].data() + layouts[k].before;
    opcts_run_args args{};
    args.struct_size = sizeof args;
    args.params = params;
    args.tensors = tensors.descriptors().data();
    args.n_tensors = static_cast<int32_t>(tensors.size());
    args.stream = nullptr;
    args.device = device;
    args.arch = &arch;
    opcts_report report{};
    const opcts_status s = desc.run(desc.impl_data, &args, &report);
    throw_abi_status(s, report, c_text(desc.name));
    for (size_t k = 0; k < outs.size(); ++k) {
      HostTensor& t = out.at(outs[k].name);
      if (const std::string breach = guard_breach(outs[k].name, outs[k].dtype, guarded[k].data(), layouts[k]);
          !breach.empty()) {
        const std::string what = c_text(desc.name) + " wrote outside its output: " + breach;
        if (!breaches) throw ContractBreach(FailureKind::written_outside, what, outs[k].name);
        breaches->push_back({outs[k].name, what});
      }
      std::memcpy(t.data(), guarded[k].data() + layouts[k].before, t.nbytes());
    }
    for (const auto& [name, t] : inputs) {
      const HostTensor& after = in_copy.at(name);
      if (std::memcmp(after.data(), t.data(), t.nbytes()) != 0)
        throw ContractBreach(FailureKind::wrote_input,
                             c_text(desc.name) + " wrote into its input '" + name + "' (inputs are read-only)");
    }
    return out;
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

TensorMap AbiImpl::run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const {
  if (!transport_) throw std::logic_error(name_ + " is not runnable in this build: " + missing_);
  if (std::string why = abi_gap(p); !why.empty()) throw std::logic_error(why);  // never hand it a misread problem
  const std::vector<unsigned char> params = family_def().abi_params(p);
  const AbiArch a(*ctx.arch);
  TensorMap out = transport_->run(desc_, params.data(), planted_inputs_ ? planted_inputs_(p, inputs) : inputs,
                                  family_def().outputs(p), a.get(), ctx.device, ctx.note, ctx.breaches);
  return planted_outputs_ ? planted_outputs_(p, std::move(out)) : out;
}

bool AbiImpl::deterministic(const Problem& p) const {
  if (!desc_.deterministic) return true;
  const std::vector<unsigned char> params = family_def().abi_params(p);
  return params.empty() || desc_.deterministic(desc_.impl_data, params.data()) != 0;
}

std::vector<InvarianceAxis> AbiImpl::invariant_axes(const Problem& p) const {
  if (!desc_.invariance) return {};
  const std::vector<unsigned char> params = family_def().abi_params(p);
  return params.empty() ? std::vector<InvarianceAxis>{}
                        : invariance_axes(desc_.invariance(desc_.impl_data, params.data()));
}

}  // namespace opcts
