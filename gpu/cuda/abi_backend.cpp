// The GPU backend: uploads, a gated non-blocking stream, the impl's run, the stream and input checks, downloads.
//
// One source for both runtimes: built with the CUDA runtime it is the CUDA backend (the cuda.*
// rows' in a CUDA build), and with OPCTS_GPU_RUNTIME_HIP=1 against HIP the HIP backend (the hip.*
// rows' in a HIP build, cmake/hip.cmake); gpu/portable/runtime.hpp maps the runtime's names. What
// differs by runtime is that file's: HIP's legacy default stream is its null stream, and the HIP
// backend SKIPs its rows where no ROCm device is found (unavailable()).
//
// The stream check (KernelBench checks generated kernels the same way): the harness creates a
// non-blocking stream and enqueues on it a gate kernel that waits for the host. Everything the
// impl puts on that stream waits behind the gate. After the impl's run returns, the harness
// synchronises the legacy default stream (which also waits for every blocking stream) and reads
// the outputs on a second non-blocking stream: they must still hold their 0xFF poison, or the
// impl wrote them from another stream — a kernel that would race with the caller's next work on
// the stream it was given. Then the gate opens and the stream is synchronised.
//
// Every output lies between guard bytes (core/output_guard.hpp, as in the host backend), at the
// misalignment its OutputSpec asks for: a run that changed a guard byte is reported naming the
// offset (RunContext::breaches, else a ContractBreach).
#include "gpu/cuda/abi_backend.hpp"

#include "gpu/portable/runtime.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "core/errors.hpp"
#include "core/output_guard.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "gpu/cuda/device_memory.hpp"
#include "gpu/cuda/stream_gate_kernels.hpp"

namespace opcts::cuda {

namespace {

// How long the gate waits for the impl's run to return before it lets the stream go (an impl
// that synchronises its stream inside run would otherwise wait forever): 2 s, or
// $OPCTS_STREAM_GATE_MS; 0 holds no stream at all, which `opcts run --sanitize` sets for its
// workers: under compute-sanitizer some impls' run calls wait for the device (measured on the
// H100: cuda.grouped_kernel and cuda.atomic_rows returned only when a 60 s hold ran out), so each
// would lose the whole hold and the check would say nothing anyway.
int gate_timeout_ms() {
  static const int ms = [] {
    const char* env = std::getenv("OPCTS_STREAM_GATE_MS");
    char* end = nullptr;
    const long v = env ? std::strtol(env, &end, 10) : 0;
    return env && *env && *end == 0 && v >= 0 && v <= 3600000 ? static_cast<int>(v) : 2000;
  }();
  return ms;
}

// CUDA loads modules lazily by default (CUDA 12.2+), and loading one may synchronise the context
// (CUDA Programming Guide §4.7, "Lazy Loading", potential hazards: a kernel that waits for
// another cannot rely on running concurrently with it) — so the first launch of each kernel
// inside run would wait for the gate's own kernel: measured on the H200, about a third of a
// mixed smoke slice's cases each lost the gate's whole timeout. Eager loading moves every
// module load of this binary, and of the libraries and plugins it loads, to context creation
// or dlopen, outside any gate. Set before the first CUDA call (this runs before main). HIP defers
// loading a code object to its first kernel's launch likewise (HIP_ENABLE_DEFERRED_LOADING, by
// ROCm's documentation on by default; not measured on an AMD GPU): off for the same reason.
const bool kEagerModuleLoading = [] {
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  setenv("HIP_ENABLE_DEFERRED_LOADING", "0", 1);
  return true;
}();

// The rows' preparations (set_prepare), by run callback.
struct Preparations {
  std::mutex mu;
  std::map<opcts_run_fn, PrepareFn> by_run;
};

Preparations& preparations() {
  static Preparations p;
  return p;
}

PrepareFn prepare_of(opcts_run_fn run) {
  Preparations& p = preparations();
  std::lock_guard<std::mutex> lock(p.mu);
  const auto it = p.by_run.find(run);
  return it == p.by_run.end() ? nullptr : it->second;
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~Stream() {
    if (s) (void)cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

// One output's allocation: guards around the tensor (core/output_guard.hpp).
struct GuardedOutput {
  GuardLayout layout;
  DeviceBuffer buffer;
  void* tensor() const { return static_cast<char*>(buffer.get()) + layout.before; }
};

// Not inlined: inlined into GpuBackend::run, GCC 12 reports its vector's delete as a free
// of a non-heap pointer (-Wfree-nonheap-object, a false positive); a copy and a stream
// synchronisation gain nothing from inlining.
[[gnu::noinline]] bool still_poisoned(const GuardedOutput& d, cudaStream_t side) {
  std::vector<unsigned char> host(d.layout.tensor);
  if (host.empty()) return true;
  check(cudaMemcpyAsync(host.data(), d.tensor(), host.size(), cudaMemcpyDeviceToHost, side), "cudaMemcpyAsync D2H");
  check(cudaStreamSynchronize(side), "cudaStreamSynchronize");
  for (unsigned char b : host)
    if (b != kOutputPoison) return false;
  return true;
}

class GpuBackend final : public AbiBackend {
 public:
  TensorMap run(const opcts_impl_desc& desc, const void* params, const TensorMap& inputs,
                const std::vector<OutputSpec>& outs, const opcts_arch& arch, int device, std::string* note,
                std::vector<GuardBreach>* breaches) const override {
    const std::string who = desc.name ? desc.name : "?";
    check(cudaSetDevice(device < 0 ? 0 : device), "cudaSetDevice");
    AbiTensors tensors;
    std::vector<DeviceBuffer> in_bufs;
    std::vector<GuardedOutput> out_bufs;
    for (const auto& [name, t] : inputs) {
      tensors.add(name, t, false);
      in_bufs.push_back(DeviceBuffer::upload(t));
    }
    TensorMap out;
    for (const auto& o : outs) {
      HostTensor& t = out.emplace(o.name, HostTensor(o.dtype, o.shape)).first->second;
      tensors.add(o.name, t, true);
      const GuardLayout g = guard_layout(o, t.nbytes());
      out_bufs.push_back(GuardedOutput{g, DeviceBuffer(g.total())});
      const std::vector<unsigned char> image = guarded_image(o.dtype, g, kOutputPoison);
      check(cudaMemcpy(out_bufs.back().buffer.get(), image.data(), image.size(), cudaMemcpyHostToDevice),
            "cudaMemcpy (output poison and guards)");
    }
    for (size_t i = 0; i < in_bufs.size(); ++i) tensors.descriptors()[i].data = in_bufs[i].get();
    for (size_t i = 0; i < out_bufs.size(); ++i) tensors.descriptors()[in_bufs.size() + i].data = out_bufs[i].tensor();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (uploads)");

    // What the row's run would otherwise set up while its stream is held (library handles,
    // cuDNN plans, cuBLASLt heuristics may wait for the device, and so for the gate): done here,
    // in the process that runs the case. supports ran in the parent process, not here.
    if (const PrepareFn prepare = prepare_of(desc.run)) prepare(desc.impl_data, params);

    Stream stream, side;
    opcts_report report{};
    opcts_status status = OPCTS_OK;
    bool written_early = false, waited = false;
    double run_ms = 0;
    {
      std::optional<StreamGate> gate;  // none: OPCTS_STREAM_GATE_MS=0 (--sanitize)
      if (gate_timeout_ms() > 0) gate.emplace(stream.s, gate_timeout_ms());
      opcts_run_args args{};
      args.struct_size = sizeof args;
      args.params = params;
      args.tensors = tensors.descriptors().data();
      args.n_tensors = static_cast<int32_t>(tensors.size());
      args.stream = stream.s;
      args.device = device;
      args.arch = &arch;
      const auto t0 = std::chrono::steady_clock::now();
      status = desc.run(desc.impl_data, &args, &report);
      run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (legacy default stream)");
      if (gate) {
        for (const auto& b : out_bufs) written_early = written_early || !still_poisoned(b, side.s);
        gate->release();
      }
      check(cudaStreamSynchronize(stream.s), "cudaStreamSynchronize (the impl's stream)");
      waited = gate && gate->timed_out();
      if (!gate && note)
        *note = "stream check not applied: the stream is not held (OPCTS_STREAM_GATE_MS=0, --sanitize)";
    }
    check(cudaGetLastError(), (who + " (after run)").c_str());
    throw_abi_status(status, report, who);
    // A run that did not return while its stream was held waited for the device (a synchronising
    // call, or a library loading a module at run time) or ran long on the host: the stream check
    // says nothing then, and the case lost the gate's timeout. Said in the note (a passing
    // record's message) and on stderr (the worker's log), not judged: a vendor library's module
    // load is not the impl's contract breach.
    if (waited) {
      char text[256];
      std::snprintf(text, sizeof text,
                    "stream check not applied: run did not return within %d ms while its stream was held "
                    "(it returned after %.0f ms)",
                    gate_timeout_ms(), run_ms);
      if (note) *note = text;
      std::fprintf(stderr, "opcts: %s: %s\n", who.c_str(), text);
    } else if (written_early)
      throw ContractBreach(FailureKind::off_stream,
                           who +
                               " wrote its outputs before the stream it was handed could run: its work went to "
                               "another stream or the legacy default stream (impls must launch on args->stream)");
    for (size_t i = 0; i < out_bufs.size(); ++i) {
      const GuardedOutput& b = out_bufs[i];
      std::vector<unsigned char> all(b.layout.total());
      check(cudaMemcpy(all.data(), b.buffer.get(), all.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H (output)");
      if (const std::string breach = guard_breach(outs[i].name, outs[i].dtype, all.data(), b.layout); !breach.empty()) {
        if (!breaches)
          throw ContractBreach(FailureKind::written_outside, who + " wrote outside its output: " + breach,
                               outs[i].name);
        breaches->push_back({outs[i].name, who + " wrote outside its output: " + breach});
      }
      HostTensor& t = out.at(outs[i].name);
      std::memcpy(t.data(), all.data() + b.layout.before, b.layout.tensor);
    }
    size_t i = 0;
    for (const auto& [name, t] : inputs) {
      HostTensor after = t;
      in_bufs[i++].download(after);
      if (std::memcmp(after.data(), t.data(), t.nbytes()) != 0)
        throw ContractBreach(FailureKind::wrote_input,
                             who + " wrote into its input '" + name + "' (inputs are read-only)");
    }
    return out;
  }

  Support fits(double bytes, const std::string& who) const override { return fits_device_memory(bytes, who); }

  std::string unavailable() const override {
    if (!gpu::kRuntime.skips_without_device) return {};
    // Asked once a process (the supervisor and `opcts list` plan with it; workers run with it).
    static const std::string why = [] {
      int n = 0;
      const cudaError_t e = cudaGetDeviceCount(&n);
      (void)cudaGetLastError();
      if (e == cudaSuccess && n > 0) return std::string();
      if (e == cudaSuccess || e == cudaErrorNoDevice) return std::string(gpu::kRuntime.no_device);
      return std::string(gpu::kRuntime.no_device) + " (" + cuda_error_text(e) + ")";
    }();
    return why;
  }
};

}  // namespace

const AbiBackend& abi_backend() {
  static const GpuBackend b;
  return b;
}

void set_prepare(opcts_run_fn run, PrepareFn prepare) {
  Preparations& p = preparations();
  std::lock_guard<std::mutex> lock(p.mu);
  p.by_run[run] = prepare;
}

}  // namespace opcts::cuda
