// Names of the failure kinds (core/failure_kind.hpp says why each exists).
#include "core/failure_kind.hpp"

namespace opcts {

std::string_view to_string(FailureKind k) {
  switch (k) {
    case FailureKind::exceeds_bound: return "exceeds_bound";
    case FailureKind::biased: return "biased";
    case FailureKind::nonfinite: return "nonfinite";
    case FailureKind::specials_mismatch: return "specials_mismatch";
    case FailureKind::untouched: return "untouched";
    case FailureKind::all_zero: return "all_zero";
    case FailureKind::not_conserved: return "not_conserved";
    case FailureKind::excess_energy: return "excess_energy";
    case FailureKind::written_outside: return "written_outside";
    case FailureKind::not_invariant: return "not_invariant";
    case FailureKind::accepted_invalid: return "accepted_invalid";
    case FailureKind::wrong_refusal: return "wrong_refusal";
    case FailureKind::wrote_input: return "wrote_input";
    case FailureKind::off_stream: return "off_stream";
    case FailureKind::nondeterministic: return "nondeterministic";
    case FailureKind::reused_result: return "reused_result";
    case FailureKind::sanitizer: return "sanitizer";
    case FailureKind::not_capturable: return "not_capturable";
    case FailureKind::stale_capture: return "stale_capture";
    case FailureKind::replay_differs: return "replay_differs";
  }
  return "?";
}

std::optional<FailureKind> parse_failure_kind(std::string_view s) {
  for (FailureKind k : kAllFailureKinds)
    if (to_string(k) == s) return k;
  return std::nullopt;
}

bool is_case_kind(FailureKind k) { return k >= FailureKind::accepted_invalid; }

}  // namespace opcts
