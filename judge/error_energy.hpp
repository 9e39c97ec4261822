// The error-energy check of an output: the root of its summed squared errors against the limit
// the reference's model of a correct kernel's roundings gives (core/family.hpp ErrorEnergy).
//
// Per-element bounds must hold for every element at once, so each carries λ ≈ 4 standard
// deviations of the modelled roundings: a bug that adds a few more roundings of the same size
// (a 16-bit P·V accumulator rounded after each key tile) moves every element by about two of
// them and passes wherever an output has too few elements for one to reach four. Their energy
// can see it: a correct kernel's Σ x_i² concentrates near (at most) tr C, the bug adds its own
// roundings' share, and the limit's excess over tr C shrinks as the output grows — so a bug
// whose share is small against that excess (one or two extra roundings on a small output) can
// still pass.
//
// The limit. For x = G·z with z's coordinates independent and 1-sub-Gaussian and C = G·Gᵀ,
//   P(‖x‖² > tr C + 2·√(tr C² · t) + 2·‖C‖·t) <= e^-t
// (D. Hsu, S. Kakade, T. Zhang, "A tail inequality for quadratic forms of subgaussian random
// vectors", Electron. Commun. Probab. 17 (2012), Theorem 1 with μ = 0: GᵀG and G·Gᵀ share
// their nonzero eigenvalues). Sources are joined by Minkowski (‖Σ x_k‖ <= Σ ‖x_k‖, no
// independence between them assumed) with t raised by ln K for K sources (a union bound),
// and the part bounded outright by ‖f‖₂. t = kEnergyTail gives a false alarm of at most e^-25
// ≈ 1.4e-11 per output, about a per-element bound's 2·e^-24 (cases/tolerances.yaml).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "numerics/tensor.hpp"

namespace opcts {

/// t of the tail bound (the file comment).
inline constexpr double kEnergyTail = 25;

/// The limit of ‖x‖₂ the file comment derives from `e`, for a false alarm of at most e^-t.
double error_energy_limit(const ErrorEnergy& e, double t = kEnergyTail);

/// What the check found on one output.
struct ErrorEnergyStats {
  int64_t elements = 0;  // the elements summed (got and want both finite)
  double norm = 0;       // ‖got − want‖_w over them
  double limit = 0;
  bool failed() const { return norm > limit; }
  double ratio() const { return limit > 0 ? norm / limit : (norm > 0 ? std::numeric_limits<double>::infinity() : 0); }
};

/// ‖got − want‖_w = √(Σ_i w_i·(got_i − want_i)²) over the elements where both are finite (NaN
/// and ±Inf are the per-element comparison's), summed in index order, against
/// error_energy_limit(e). Throws std::invalid_argument when got, want and a non-empty
/// e.weight differ in size.
ErrorEnergyStats check_error_energy(const std::string& name, const HostTensor& got, const std::vector<double>& want,
                                    const ErrorEnergy& e);

}  // namespace opcts
