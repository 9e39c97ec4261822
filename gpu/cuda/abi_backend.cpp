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

// The device buffers of one run, or of one recording and its replays (--capture): the inputs'
// copies and the guarded, poisoned outputs, with the descriptors that point at them. Their
// addresses never change.
class DeviceBuffers {
 public:
  DeviceBuffers(const TensorMap& inputs, const std::vector<OutputSpec>& outs) : outs_(outs) {
    for (const auto& [name, t] : inputs) {
      tensors_.add(name, t, false);
      in_.push_back(DeviceBuffer::upload(t));
    }
    for (const auto& o : outs) {
      const HostTensor& t = shapes_.emplace(o.name, HostTensor(o.dtype, o.shape)).first->second;
      tensors_.add(o.name, t, true);
      const GuardLayout g = guard_layout(o, t.nbytes());
      out_.push_back(GuardedOutput{g, DeviceBuffer(g.total())});
    }
    poison();
    for (size_t i = 0; i < in_.size(); ++i) tensors_.descriptors()[i].data = in_[i].get();
    for (size_t i = 0; i < out_.size(); ++i) tensors_.descriptors()[in_.size() + i].data = out_[i].tensor();
  }

  // The run's arguments on `stream`.
  opcts_run_args args(const void* params, cudaStream_t stream, int device, const opcts_arch& arch, const char* tactic) {
    return tensors_.run_args(params, stream, device, arch, tactic);
  }

  // Every output filled with its poison between its guards again, and the device synchronised: a
  // copy from pageable memory may return before its DMA lands (CUDA Runtime API, "API
  // synchronization behavior"), and work on a non-blocking stream would not wait for it (measured
  // under --capture on the H200 before this synchronisation: replays whose last rows still held
  // poison, or inputs half old).
  void poison() {
    for (size_t i = 0; i < out_.size(); ++i) {
      const std::vector<unsigned char> image = guarded_image(outs_[i].dtype, out_[i].layout, kOutputPoison);
      check(cudaMemcpy(out_[i].buffer.get(), image.data(), image.size(), cudaMemcpyHostToDevice),
            "cudaMemcpy (output poison and guards)");
    }
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (uploads)");
  }

  // --capture: `inputs` copied into the same input buffers, the outputs poisoned afresh (and the
  // device synchronised, poison()).
  void reload(const TensorMap& inputs) {
    size_t i = 0;
    for (const auto& [name, t] : inputs) {
      if (i >= in_.size() || t.nbytes() != in_[i].bytes())
        throw std::logic_error("reload: input '" + name + "' does not fit its buffer");
      if (t.nbytes()) check(cudaMemcpy(in_[i].get(), t.data(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
      ++i;
    }
    poison();
  }

  // Whether every output still holds its poison, read on `side`.
  bool poisoned(cudaStream_t side) const {
    for (const auto& b : out_)
      if (!still_poisoned(b, side)) return false;
    return true;
  }

  // Whether some output has bytes to write.
  bool has_output_bytes() const {
    for (const auto& b : out_)
      if (b.layout.tensor) return true;
    return false;
  }

  // The outputs downloaded, their guards checked (breaches as AbiBackend::run says).
  TensorMap outputs(const std::string& who, std::vector<GuardBreach>* breaches) const {
    TensorMap out = shapes_;
    for (size_t i = 0; i < out_.size(); ++i) {
      const GuardedOutput& b = out_[i];
      std::vector<unsigned char> all(b.layout.total());
      check(cudaMemcpy(all.data(), b.buffer.get(), all.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H (output)");
      if (const std::string breach = guard_breach(outs_[i].name, outs_[i].dtype, all.data(), b.layout);
          !breach.empty()) {
        if (!breaches)
          throw ContractBreach(FailureKind::written_outside, who + " wrote outside its output: " + breach,
                               outs_[i].name);
        breaches->push_back({outs_[i].name, who + " wrote outside its output: " + breach});
      }
      HostTensor& t = out.at(outs_[i].name);
      std::memcpy(t.data(), all.data() + b.layout.before, b.layout.tensor);
    }
    return out;
  }

  // Refuses an impl that wrote into an input: the buffers must still hold `inputs`.
  void check_inputs(const std::string& who, const TensorMap& inputs) const {
    size_t i = 0;
    for (const auto& [name, t] : inputs) {
      HostTensor after = t;
      in_[i++].download(after);
      if (std::memcmp(after.data(), t.data(), t.nbytes()) != 0)
        throw ContractBreach(FailureKind::wrote_input,
                             who + " wrote into its input '" + name + "' (inputs are read-only)");
    }
  }

 private:
  std::vector<OutputSpec> outs_;
  AbiTensors tensors_;
  TensorMap shapes_;
  std::vector<DeviceBuffer> in_;
  std::vector<GuardedOutput> out_;
};

// A captured graph and its executable, destroyed on scope exit.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
  }
};

// Why a recording cannot be used: a ContractBreach of kind not_capturable.
ContractBreach not_capturable(const std::string& who, const std::string& what) {
  return ContractBreach(FailureKind::not_capturable,
                        who + " cannot be recorded into a CUDA graph and replayed: " + what +
                            " (stream capture forbids synchronising and allocating calls, CUDA Programming Guide "
                            "\"CUDA Graphs\", prohibited operations)");
}

class GpuBackend final : public AbiBackend {
 public:
  TensorMap run(const opcts_impl_desc& desc, const void* params, const TensorMap& inputs,
                const std::vector<OutputSpec>& outs, const opcts_arch& arch, int device, const char* tactic,
                std::string* note, std::vector<GuardBreach>* breaches) const override {
    const std::string who = desc.name ? desc.name : "?";
    check(cudaSetDevice(device < 0 ? 0 : device), "cudaSetDevice");
    DeviceBuffers bufs(inputs, outs);

    // What the row's run would otherwise set up while its stream is held (library handles,
    // cuDNN plans, cuBLASLt heuristics may wait for the device, and so for the gate): done here,
    // in the process that runs the case. supports ran in the parent process, not here.
    if (const PrepareFn prepare = prepare_of(desc.run)) prepare(desc.impl_data, params, tactic);

    Stream stream, side;
    opcts_report report{};
    opcts_status status = OPCTS_OK;
    bool written_early = false, waited = false;
    double run_ms = 0;
    {
      std::optional<StreamGate> gate;  // none: OPCTS_STREAM_GATE_MS=0 (--sanitize)
      if (gate_timeout_ms() > 0) gate.emplace(stream.s, gate_timeout_ms());
      const opcts_run_args args = bufs.args(params, stream.s, device, arch, tactic);
      const auto t0 = std::chrono::steady_clock::now();
      status = desc.run(desc.impl_data, &args, &report);
      run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (legacy default stream)");
      if (gate) {
        written_early = !bufs.poisoned(side.s);
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
    TensorMap out = bufs.outputs(who, breaches);
    bufs.check_inputs(who, inputs);
    return out;
  }

  // --capture: the run recorded on the impl's stream in global capture mode (as PyTorch's
  // torch.cuda.graph records by default), so a synchronising or allocating call anywhere fails
  // the capture; nothing recorded runs until the graph is launched, so outputs written while the
  // run was recorded were written off the stream. Each replay is a launch of the graph on that
  // stream followed by its synchronisation: the stream gate has nothing to hold (no impl code runs).
  CapturedRun run_captured(const opcts_impl_desc& desc, const void* params, const TensorMap& capture_inputs,
                           const TensorMap& inputs, const std::vector<OutputSpec>& outs, const opcts_arch& arch,
                           int device, const char* tactic, std::string*,
                           std::vector<GuardBreach>* breaches) const override {
    const std::string who = desc.name ? desc.name : "?";
    check(cudaSetDevice(device < 0 ? 0 : device), "cudaSetDevice");
    DeviceBuffers bufs(capture_inputs, outs);
    if (const PrepareFn prepare = prepare_of(desc.run)) prepare(desc.impl_data, params, tactic);

    Stream stream, side;
    Graph g;
    opcts_report report{};
    check(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    const opcts_run_args args = bufs.args(params, stream.s, device, arch, tactic);
    const opcts_status status = desc.run(desc.impl_data, &args, &report);
    const cudaError_t ended = cudaStreamEndCapture(stream.s, &g.graph);
    const cudaError_t during = cudaGetLastError();  // a call the capture refused (not sticky)
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after capture)");
    if (ended != cudaSuccess || !g.graph)
      throw not_capturable(
          who, "the capture failed (" + cuda_error_text(ended) + ")" +
                   (during != cudaSuccess ? ", first refused call: " + cuda_error_text(during) : "") +
                   (status != OPCTS_OK ? ", and its run returned: " +
                                             std::string(report.message, strnlen(report.message, sizeof report.message))
                                       : ""));
    if (status != OPCTS_OK) {
      try {
        throw_abi_status(status, report, who);
      } catch (const std::exception& e) {
        throw not_capturable(who, std::string("its run returned an error while it was recorded: ") + e.what());
      }
    }
    if (!bufs.poisoned(side.s))
      throw ContractBreach(FailureKind::off_stream,
                           who +
                               " wrote its outputs while its run was being recorded, before any replay: its work "
                               "ran outside the stream it was handed (a capture records only that stream's work)");
    size_t nodes = 0;
    check(cudaGraphGetNodes(g.graph, nullptr, &nodes), "cudaGraphGetNodes");
    if (nodes == 0 && bufs.has_output_bytes())
      throw not_capturable(who, "its run put no work on the stream it was handed: the recorded graph is empty");
    if (const cudaError_t e = cudaGraphInstantiateWithFlags(&g.exec, g.graph, 0); e != cudaSuccess) {
      (void)cudaGetLastError();
      throw not_capturable(who, "the recorded graph does not instantiate (" + cuda_error_text(e) + ")");
    }
    const auto replay = [&](const char* which) {
      if (const cudaError_t e = cudaGraphLaunch(g.exec, stream.s); e != cudaSuccess) {
        if (gpu::is_sticky_error(e)) check(e, "cudaGraphLaunch");
        (void)cudaGetLastError();
        throw not_capturable(who, std::string("the ") + which + " replay did not launch (" + cuda_error_text(e) + ")");
      }
      check(cudaStreamSynchronize(stream.s), "cudaStreamSynchronize (replay)");
      return bufs.outputs(who, breaches);
    };
    CapturedRun r;
    r.at_capture = replay("first");
    bufs.check_inputs(who, capture_inputs);
    bufs.reload(inputs);
    r.first = replay("second");
    bufs.poison();
    r.second = replay("third");
    bufs.check_inputs(who, inputs);
    return r;
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
