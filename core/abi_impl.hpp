// Impls behind the plugin ABI (include/opcts/plugin.h): a C descriptor as an opcts Impl, and the
// backends that move a case's tensors to where the impl reads them.
//
// An AbiImpl converts the problem into its family's C parameter struct (Family::abi_params),
// asks the descriptor's `supports`, and runs it through an AbiBackend: the host backend hands
// host memory, the CUDA backend (gpu/cuda/abi_backend.cpp) device memory on a stream of
// its own. Both poison outputs with 0xFF bytes, refuse an impl that wrote into an input (naming
// the tensor) and map the status: OPCTS_INVALID_ARGUMENT → InvalidArgument(argument),
// OPCTS_UNSUPPORTED → Unsupported, anything else → std::runtime_error.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "include/opcts/plugin.h"

namespace opcts {

/// A built-in planted row's Impl::blind_spot: from the problem and the case's evidence.
using BlindSpotFn = std::function<std::string(const Problem&, const CaseEvidence&)>;

/// DLPack's (code, bits) for a dtype (OPCTS_DL_* of plugin.h), and back; nullopt for none.
opcts_dtype abi_dtype(DType t);
std::optional<DType> dtype_of_abi(opcts_dtype t);

/// A family's C parameter struct (opcts_<family>_params, trivially copyable) as the bytes
/// Family::abi_params returns, and those bytes back as the struct (throws std::invalid_argument
/// when the sizes differ).
template <class C>
std::vector<unsigned char> abi_bytes(const C& c) {
  std::vector<unsigned char> b(sizeof c);
  std::memcpy(b.data(), &c, sizeof c);
  return b;
}
template <class C>
C abi_struct(const std::vector<unsigned char>& bytes) {
  if (bytes.size() != sizeof(C)) throw std::invalid_argument("ABI parameter bytes of another struct");
  C c;
  std::memcpy(&c, bytes.data(), sizeof c);
  return c;
}

/// An arch as the ABI sees it; owns the strings the C struct points to.
class AbiArch {
 public:
  explicit AbiArch(const ArchInfo& a);
  const opcts_arch& get() const { return arch_; }

 private:
  std::string name_, backend_;
  std::vector<std::string> caps_;
  std::vector<const char*> cap_ptrs_;
  opcts_arch arch_{};
};

/// Descriptors of host tensors for a run: the names, shapes and strides the C structs point to.
/// `data` of each descriptor is left for the backend to fill (host or device pointer).
class AbiTensors {
 public:
  void add(const std::string& name, const HostTensor& t, bool is_output);
  std::vector<opcts_tensor>& descriptors() { return descs_; }
  size_t size() const { return descs_.size(); }
  /// A run's arguments over these descriptors (`stream`: null on the host; `tactic`: null or the
  /// case's tactic, RunContext::tactic).
  opcts_run_args run_args(const void* params, void* stream, int device, const opcts_arch& arch, const char* tactic);

 private:
  struct Owned {
    std::string name;
    std::vector<int64_t> shape, strides;
  };
  std::vector<std::unique_ptr<Owned>> owned_;
  std::vector<opcts_tensor> descs_;
};

/// Throws the error an ABI status stands for (nothing for OPCTS_OK); `who` names the impl.
void throw_abi_status(opcts_status s, const opcts_report& report, const std::string& who);

/// Where an ABI impl's tensors live. run() makes the outputs `outs` (poisoned with
/// kOutputPoison), hands inputs and outputs to the impl, and returns the outputs on the host; it
/// throws FAIL-worthy problems (an input written, work off the given stream) as ContractBreach
/// (core/errors.hpp). An output written outside is added to `*breaches` when `breaches` is not
/// null (the outputs are still returned, to be compared), else thrown as ContractBreach. A check
/// it could not apply to this run is said in `*note` when `note` is not null (RunContext::note).
/// `tactic` (null: none) reaches the impl as opcts_run_args.tactic.
class AbiBackend {
 public:
  virtual ~AbiBackend() = default;
  virtual TensorMap run(const opcts_impl_desc& desc, const void* params, const TensorMap& inputs,
                        const std::vector<OutputSpec>& outs, const opcts_arch& arch, int device, const char* tactic,
                        std::string* note, std::vector<GuardBreach>* breaches) const = 0;
  /// --capture (Impl::run_captured): the impl's run recorded once with `capture_inputs` in the
  /// input buffers and replayed on them, then `inputs` copied into the same buffers and the
  /// recording replayed twice, the outputs poisoned afresh before each replay. The GPU backend
  /// records a CUDA graph on the stream it hands the impl (global capture mode: a synchronising
  /// or allocating call fails the capture) and throws ContractBreach(not_capturable) for a run
  /// that cannot be recorded, ContractBreach(off_stream) for outputs written while it was being
  /// recorded; the host backend calls run three times on the same buffers. Inputs and guards are
  /// checked as in run.
  virtual CapturedRun run_captured(const opcts_impl_desc& desc, const void* params, const TensorMap& capture_inputs,
                                   const TensorMap& inputs, const std::vector<OutputSpec>& outs, const opcts_arch& arch,
                                   int device, const char* tactic, std::string* note,
                                   std::vector<GuardBreach>* breaches) const = 0;
  /// Whether `bytes` of tensors fit where the impl runs (device memory); yes on the host.
  virtual Support fits(double bytes, const std::string& who) const;
  /// Why no impl of this backend can run on this machine ("no ROCm device found"), or "": its
  /// impls' every case is then a SKIP saying so (AbiImpl::unavailable and supports).
  virtual std::string unavailable() const { return {}; }
};

/// The host backend: host memory, no stream.
const AbiBackend& host_abi_backend();

/// Why an impl that declares plugin ABI minor version `declared` must not be handed `p`, or ""
/// (Family::abi_minor): "<impl>: this problem needs plugin ABI 1.N (...); the impl declares 1.M".
std::string abi_gap_reason(const Family& f, const Problem& p, const std::string& impl, uint32_t declared);

/// An Impl backed by an ABI descriptor. The descriptor's strings are copied; `backend` is null
/// when this build cannot run the descriptor's backend (every case is then a SKIP saying
/// `missing_backend`, so the impl's ids are the same in every build).
class AbiImpl final : public Impl {
 public:
  AbiImpl(const opcts_impl_desc& desc, const AbiBackend* backend, std::string missing_backend = "");

  std::string_view family() const override { return family_; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return backend_name_; }
  std::vector<std::string> required_caps() const override { return caps_; }
  Support supports(const Problem& p, const ArchInfo& arch) const override;
  std::string unavailable() const override;
  std::string abi_gap(const Problem& p) const override;
  /// The minor version the descriptor declares (0 for a descriptor of ABI 1.0's size).
  uint32_t abi_minor() const { return desc_.abi_minor; }
  /// Whether the descriptor has a list_tactics callback (ABI 1.11).
  bool lists_tactics() const { return desc_.list_tactics != nullptr; }
  TensorMap run(const Problem& p, const TensorMap& inputs, const RunContext& ctx) const override;
  /// Through the backend's run_captured (a CUDA graph on the GPU backends).
  CapturedRun run_captured(const Problem& p, const TensorMap& capture_inputs, const TensorMap& inputs,
                           const RunContext& ctx) const override;
  bool planted() const override { return planted_; }
  /// The built-in row's per-tactic claim where it set one (set_deterministic_tactic), else the
  /// descriptor's deterministic callback, whose claim holds for every tactic of the problem.
  bool deterministic(const Problem& p, std::string_view tactic) const override;
  /// For a built-in row with tactics whose claim depends on the tactic (Row::deterministic_tactic):
  /// called with the impl data, the parameter struct and the case's tactic (null for none).
  using DeterministicTacticFn = int32_t (*)(const void* impl_data, const void* params, const char* tactic);
  void set_deterministic_tactic(DeterministicTacticFn f) { deterministic_tactic_ = f; }
  /// The descriptor's invariance callback's axes (ABI 1.10); none where it has none.
  std::vector<InvarianceAxis> invariant_axes(const Problem& p) const override;
  /// The descriptor's list_tactics answer (ABI 1.11), or a built-in row's tactics function; none
  /// where it has neither. Throws std::runtime_error naming the impl for a malformed list.
  std::vector<std::string> tactics(const Problem& p) const override;
  /// For a built-in row: its tactics per problem (Row::tactics).
  void set_tactics(std::function<std::vector<std::string>(const Problem&)> f) { tactics_ = std::move(f); }
  /// For a built-in planted row: which problems can show its bug ("" when one can; the SKIP
  /// reason otherwise). Checked before the descriptor's supports.
  void set_cannot_show(std::function<std::string(const Problem&)> f) { cannot_show_ = std::move(f); }
  /// For a built-in planted row whose bug is in what the kernel is given: the inputs with the
  /// bug applied (refimpl's planted_inputs), uploaded instead of the case's own.
  void set_planted_inputs(std::function<TensorMap(const Problem&, const TensorMap&)> f) {
    planted_inputs_ = std::move(f);
  }
  /// For a built-in planted row whose bug is in what the kernel returns: the outputs with the bug
  /// applied (families' planted_outputs), judged instead of the kernel's own.
  void set_planted_outputs(std::function<TensorMap(const Problem&, TensorMap)> f) { planted_outputs_ = std::move(f); }
  /// For a built-in planted row: where the bound may not see its bug (Impl::blind_spot).
  void set_blind_spot(BlindSpotFn f) { blind_spot_ = std::move(f); }
  std::string blind_spot(const Problem& p, const CaseEvidence& e) const override {
    return blind_spot_ ? blind_spot_(p, e) : std::string();
  }
  /// For a built-in planted row whose bug only `--capture` sees (Impl::bug_needs_capture).
  void set_bug_needs_capture(bool b) { bug_needs_capture_ = b; }
  bool bug_needs_capture() const override { return bug_needs_capture_; }
  /// For a built-in planted row whose bug only `--bitwise` sees (Impl::bug_needs_bitwise).
  void set_bug_needs_bitwise(bool b) { bug_needs_bitwise_ = b; }
  bool bug_needs_bitwise() const override { return bug_needs_bitwise_; }

 private:
  std::string family_, name_, backend_name_, missing_;
  std::vector<std::string> caps_;
  bool planted_ = false;
  opcts_impl_desc desc_{};
  const AbiBackend* transport_ = nullptr;
  std::function<std::string(const Problem&)> cannot_show_;
  std::function<TensorMap(const Problem&, const TensorMap&)> planted_inputs_;
  std::function<TensorMap(const Problem&, TensorMap)> planted_outputs_;
  BlindSpotFn blind_spot_;
  std::function<std::vector<std::string>(const Problem&)> tactics_;
  DeterministicTacticFn deterministic_tactic_ = nullptr;
  bool bug_needs_bitwise_ = false;
  bool bug_needs_capture_ = false;
  // Throws std::logic_error where run must not be called: no backend in this build, an ABI gap.
  void check_runnable(const Problem& p) const;
};

}  // namespace opcts
