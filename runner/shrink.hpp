// Shrinking a failing case: the smallest problem, field by field, that fails the same way.
//
// A failure found on a large or sampled problem is easier to debug, report and pin on a small
// one. shrink_case tries smaller values for each number of the problem's id (sq77 → sq65,
// n4096 → n129, ...; not the numbers of type names such as fp32 or i64), keeps a candidate when the family accepts it
// (the id parses back to itself) and its case fails the same way (the same raw outcome and the same set of (output,
// failure kind)), and goes on until no number can shrink or the time is spent. Candidates
// prefer tile boundaries: 1, 2, 3, the powers of two and their neighbours, multiples of 16, 64
// and 128, then halving and one less, smallest first.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "runner/suite.hpp"

namespace opcts {

/// What a shrink found: the original and the shrunk case ids (equal when nothing shrank), the
/// shrunk case's record, how many candidates ran and whether the time ran out first.
struct ShrinkResult {
  std::string original, shrunk;
  ResultRecord record;
  int tried = 0;
  bool out_of_time = false;
};

/// How a case failed, compared between candidates: its raw outcome and its (output, kind) pairs
/// ("FAIL O:exceeds_bound y:biased"). Counts and ratios are left out: a smaller problem fails
/// with fewer elements.
std::string failure_signature(const ResultRecord& r);

/// The candidates smaller than v tried for a number of an id, smallest first (v >= 1).
std::vector<int64_t> shrink_candidates(int64_t v);

/// Runs the case `id` in this process (impl on `device`), then its candidates, at most
/// `seconds` of wall time in all. Throws std::invalid_argument for an unknown id, an impl of
/// another backend, or a case that does not fail (PASS, SKIP: nothing to shrink). `progress`,
/// when given, hears each accepted id.
ShrinkResult shrink_case(const Suite& suite, const std::string& id, int device, double seconds,
                         const std::function<void(const std::string&)>& progress = {});

}  // namespace opcts
