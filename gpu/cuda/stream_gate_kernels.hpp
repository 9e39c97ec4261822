// A gate that holds a CUDA stream until the host releases it: how the ABI backend sees whether an
// impl did its work on the stream it was handed (no harness types).
#pragma once

struct CUstream_st;

namespace opcts::cuda {

/// Enqueues on `stream` a one-thread kernel that spins until release() (or until `timeout_ms`
/// passed, so an impl that synchronises the stream inside its run cannot hang the case). Work an
/// impl enqueues on the stream waits behind it; work elsewhere does not.
class StreamGate {
 public:
  StreamGate(CUstream_st* stream, int timeout_ms);
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  /// Lets the stream go on (idempotent); the destructor releases too.
  void release();
  /// Whether the kernel gave up waiting (then the impl waited for its own stream inside run, and
  /// what ran before release() says nothing about other streams). Valid after the stream synchronised.
  bool timed_out() const;
  ~StreamGate();

 private:
  CUstream_st* stream_ = nullptr;
  volatile int* flag_ = nullptr;  // mapped host memory: 1 = released
  int* timed_out_ = nullptr;      // mapped host memory, written by the kernel
};

}  // namespace opcts::cuda
