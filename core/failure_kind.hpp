// The closed set of ways a case FAILs: what the comparison, the backends' guards and the
// harness's own checks saw, one kind per output (or per case) — the vocabulary of typed xfails.
//
// A manifest xfail that expects FAIL names the outputs and kinds it expects (docs/manifests.md);
// any other kind, or the same kind on another output, is a FAIL the entry does not absorb. So
// each kind is a distinct thing a kernel gets wrong, narrow enough that a known finding of one
// kind (cuDNN's softcap lse a little beyond its bound) cannot hide a new bug of another (NaN in
// O, or a write past the output's end).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace opcts {

enum class FailureKind {
  // ---- kinds of one output (Failure::out names it) ----
  /// Finite elements beyond their per-element bound. Failure::ratio is the largest error ÷
  /// bound among them, so an xfail may cap how far a known inaccuracy may go (`max_ratio`): a
  /// kernel whose error grows past the measured finding fails again.
  exceeds_bound,
  /// The bounded metric's bias check: the error's slope against the value lies outside the
  /// interval a correct device's lies in (judge/accumulator.hpp) — a relative error common to
  /// every element (a scale 2^-8 low, an accumulator that truncates) that no element shows alone.
  biased,
  /// NaN or ±Inf where the reference is finite (elements still holding the backend's poison are
  /// `untouched` instead): overflow, 0·NaN from masked poison, a division by an empty sum.
  nonfinite,
  /// Where the reference is NaN or ±Inf, something else: a finite value, the other infinity, or
  /// NaN for an infinity. A kernel that saturates, flushes or drops a special the operator must
  /// propagate (a grouped GEMM's tail rows, a cast's NaN).
  specials_mismatch,
  /// Elements that still hold the poison the ABI backends fill outputs with (0xFF bytes:
  /// core/output_guard.hpp kOutputPoison) where the reference holds another value: never
  /// written — a skipped tile, an early return, work on another buffer. Told apart in fp16,
  /// bf16, fp32 and fp64, where all ones is a NaN no arithmetic writes; an 8-bit float's 0xFF
  /// is the NaN a conversion gives (nonfinite there).
  untouched,
  /// Every element is zero while the reference is not: a kernel that never ran into a
  /// zero-initialised buffer, or a result multiplied by a zero scale. Said instead of
  /// exceeds_bound, which it explains.
  all_zero,
  /// The conservation check (judge/conservation.hpp): the sum of a group of the output (a
  /// destination row of scatter_add / index_add, or the whole output) lies outside the
  /// interval every correct summation order gives — lost or doubled updates that each element's
  /// own bound is too wide to see. Failure::count is the number of such groups.
  not_conserved,
  /// The error-energy check (judge/error_energy.hpp): the root of the output's summed squared
  /// errors exceeds what the modelled roundings of a correct kernel reach (a quadratic-form tail
  /// bound) — many elements each within its own bound but together too far, such as one extra
  /// rounding per key tile (a 16-bit P·V accumulator). Failure::ratio is the root ÷ its limit.
  excess_energy,
  /// Bytes of the guard bands around the output changed (core/output_guard.hpp): a write past
  /// the end or before the start, such as a paired 16-bit atomic's +0 into the neighbour.
  written_outside,
  /// --invariance: the impl declares its output invariant over an axis of the problem
  /// (core/invariance.hpp: the batch's size, an entry's position in it), and the same entry run
  /// in the sub-problem the runner built along that axis gave other bytes in this output — a
  /// kernel choice (split-K, split-KV, a GEMV path) that depends on the batch around a row.
  not_invariant,

  // ---- kinds of the case as a whole (Failure::out is empty) ----
  /// A negative case (Family::expected_error) ran to the end: the impl accepted an argument the
  /// contract says it must refuse.
  accepted_invalid,
  /// A negative case was refused, but not with InvalidArgument naming the argument: another
  /// argument named, or another error (a vendor status, a shape error that names nothing).
  wrong_refusal,
  /// The impl wrote into one of its inputs (their fingerprints changed).
  wrote_input,
  /// CUDA: the outputs changed before the stream the impl was handed could run — its work went
  /// to another stream or to the legacy default stream.
  off_stream,
  /// --bitwise: an impl that claims determinism gave other bytes on a second run.
  nondeterministic,
  /// --bitwise: the inputs of a second seed gave the very same output bytes (a result kept from
  /// an earlier call).
  reused_result,
  /// --sanitize TOOL: compute-sanitizer reported an error in the worker that ran this case alone
  /// (an out-of-bounds or misaligned access, a race, a barrier misuse, uninitialised memory);
  /// the message holds its first report.
  sanitizer,
  /// --capture: the impl's run could not be recorded into a CUDA graph on the stream it was
  /// handed and replayed — it synchronised, allocated or made another call stream capture
  /// forbids, returned an error only under capture, or its graph failed to instantiate or launch.
  not_capturable,
  /// --capture: the recording, replayed after the case's inputs were copied into its buffers,
  /// gave the very bytes it gave on the capture-time inputs — a result computed at capture (on
  /// the host, or on another stream) and kept, not recomputed from the buffers' contents.
  stale_capture,
  /// --capture: a replay of a deterministic impl's recording gave other bytes than a plain run on
  /// the same inputs or than the other replay — something read at capture and baked into the
  /// recording (a scale read on the host, a pointer-keyed cache), or a replay that races.
  replay_differs,
};

/// The last kind declared: a kind added after it must take its place here.
inline constexpr FailureKind kLastFailureKind = FailureKind::replay_differs;

/// Every kind, in declaration order (output kinds first): the enumerators are 0 to kLastFailureKind.
inline constexpr auto kAllFailureKinds = [] {
  std::array<FailureKind, static_cast<size_t>(kLastFailureKind) + 1> all{};
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<FailureKind>(i);
  return all;
}();

/// The kind's name as manifests, JSON lines and JUnit spell it ("exceeds_bound").
std::string_view to_string(FailureKind k);
/// Parses a name written by to_string; std::nullopt for anything else.
std::optional<FailureKind> parse_failure_kind(std::string_view s);
/// True for the kinds of the case as a whole (accepted_invalid ... replay_differs), false for
/// the kinds of one output.
bool is_case_kind(FailureKind k);

}  // namespace opcts
