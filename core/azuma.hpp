// Azuma–Hoeffding's multiplier Λ for a false-alarm probability: the one used by every probabilistic bound.
#pragma once

#include <cmath>

namespace opcts {

/// Λ with 2·exp(−Λ²/2) = p, i.e. Λ = √(2·ln(2/p)), for a false-alarm probability p in (0, 1).
/// Azuma–Hoeffding's two-sided tail: for a sum of martingale differences e_k (each of mean zero
/// given the ones before, e.g. independent mean-zero roundings) with |e_k| <= c_k,
/// P(|Σ_k e_k| >= Λ·√(Σ_k c_k²)) <= 2·exp(−Λ²/2) = p (W. Hoeffding, "Probability inequalities
/// for sums of bounded random variables", J. Amer. Statist. Assoc. 58, 1963, Theorem 2;
/// K. Azuma, "Weighted sums of certain dependent random variables", Tôhoku Math. J. 19, 1967).
/// So Λ·√(Σ c²) bounds such a sum except with probability p: 7.5265089 at p = 1e-12 (the
/// indexing bounds, the scaled GEMMs' false_alarm), √48 = 6.9282032 at p = 2·e^-24 (the
/// lse floor). Not constexpr (std::log and std::sqrt are not before C++26): callers on a hot
/// path keep the value in a constant computed once.
inline double azuma_lambda(double p) { return std::sqrt(2 * std::log(2 / p)); }

}  // namespace opcts
