// Rank tactics: the CUDA rows that run each entry of a list a library returns on the device
// (cuda.cublaslt's heuristic algorithms "h<i>", cuda.cudnn's engine configs "c<i>") name a rank
// of that list. Reading the rank a tactic names, and what a rank past the list's end throws; no
// CUDA and no plugin ABI (the kernels' headers include it; rows.hpp's tactic_of reads the ABI).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace opcts::cuda {

/// The library returned fewer entries on this device than the case's rank asks for: the row's
/// run returns OPCTS_TACTIC_UNAVAILABLE with the message (a SKIP). `count` is how many it
/// returned (at least one: none is the library's refusal of the problem, whatever the rank).
struct RankAbsent : std::runtime_error {
  RankAbsent(int rank_asked, int returned, const std::string& message)
      : std::runtime_error(message), rank(rank_asked), count(returned) {}
  int rank;
  int count;
};

/// The tactics of a rank list, "<prefix>0" .. "<prefix><ranks - 1>", every rank whatever the
/// device (ids stay stable; a rank the device lacks is a SKIP at run time).
inline std::vector<std::string> rank_tactics(char prefix, int ranks) {
  std::vector<std::string> names;
  for (int rank = 0; rank < ranks; ++rank) names.push_back(std::string(1, prefix) + std::to_string(rank));
  return names;
}

/// The rank "<prefix><digit>" names, below `ranks` (at most 10); 0 for a null tactic. opcts hands
/// a run only the tactics its row listed, so another name throws std::runtime_error naming it
/// and `row`.
inline int tactic_rank(const char* t, char prefix, int ranks, const char* row) {
  if (!t) return 0;
  if (ranks <= 10 && t[0] == prefix && t[1] >= '0' && t[1] < '0' + ranks && t[2] == '\0') return t[1] - '0';
  throw std::runtime_error(std::string(row) + ": no tactic '" + t + "' is listed for this row");
}

}  // namespace opcts::cuda
