// Choosing the cases of one shard: problems are the unit, balanced by plan_shards.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"
#include "runner/shard_plan.hpp"

namespace opcts {

/// The cases of shard `spec` among `cases`. All impls of one problem stay in one shard and
/// run one after another, so a worker generates the inputs and reference once
/// (ReferenceCache). A problem's cost is the estimate from its FLOPs and bytes
/// (estimate_seconds), or the sum of its cases' times when `times_file` knows them all.
/// Order: by problem, then impl. The same cases give the same shards on every machine.
std::vector<Case> shard_cases(const std::vector<Case>& cases, ShardSpec spec, const std::string& times_file,
                              bool on_gpu);

}  // namespace opcts
