// Recomputing a sample of the reference cache and comparing it bit for bit.
#include "runner/ref_cache_verify.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

namespace opcts {

namespace {

namespace fs = std::filesystem;

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool same_maps(const std::map<std::string, std::vector<double>>& a, const std::map<std::string, std::vector<double>>& b,
               std::string& which) {
  if (a.size() != b.size()) {
    which = "another set of outputs";
    return false;
  }
  for (const auto& [name, v] : a) {
    const auto it = b.find(name);
    if (it == b.end() || !same_bits(v, it->second)) {
      which = name;
      return false;
    }
  }
  return true;
}

// Where two References differ ("exact O", "bound lse@two_pass", ...), or "".
std::string difference(const References& stored, const References& fresh) {
  std::string which;
  if (!same_maps(stored.exact, fresh.exact, which)) return "exact " + which;
  if (!same_maps(stored.lowp, fresh.lowp, which)) return "lowp " + which;
  if (!same_maps(stored.bound, fresh.bound, which)) return "bound " + which;
  if (stored.reduction.size() != fresh.reduction.size()) return "reduction outputs";
  for (const auto& [name, st] : stored.reduction) {
    const auto it = fresh.reduction.find(name);
    if (it == fresh.reduction.end()) return "reduction " + name;
    const ReductionStats& f = it->second;
    if (st.terms != f.terms || st.zero_mean != f.zero_mean || st.exact_term_bits != f.exact_term_bits ||
        !same_bits(st.abs_sum, f.abs_sum) || !same_bits(st.sq_sum, f.sq_sum) || !same_bits(st.magnitude, f.magnitude) ||
        !same_bits(st.offset, f.offset) || !same_bits(st.unsaturated, f.unsaturated))
      return "reduction " + name;
  }
  return "";
}

}  // namespace

CacheVerdict verify_ref_cache(const Registry& reg, const RefDiskCache& cache, size_t sample) {
  CacheVerdict v;
  struct Entry {
    std::string path, key;
    const Family* family;
    std::string problem_id;
  };
  std::vector<Entry> mine;
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(cache.dir(), ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ".ref") files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  const auto drop = [&](const std::string& path, const std::string& why, size_t& counter) {
    ++counter;
    v.lines.push_back(path + ": " + why + "; removed");
    std::error_code e2;
    fs::remove(path, e2);
  };
  for (const auto& path : files) {
    ++v.files;
    const auto key = RefDiskCache::key_of_file(path);
    if (!key) {
      drop(path, "unreadable (truncated, corrupt or of another format)", v.unreadable);
      continue;
    }
    // <family>/<problem id>@<version>+<digest>#<inputs>
    const auto slash = key->find('/'), at = key->rfind('@'), hash = key->rfind('#');
    const Family* f = slash == std::string::npos ? nullptr : reg.family(key->substr(0, slash));
    if (!f || at == std::string::npos || hash == std::string::npos || at < slash || hash < at) {
      drop(path, *key + ": not a key of a family this opcts has", v.unreadable);
      continue;
    }
    if (key->substr(at + 1, hash - at - 1) != f->reference_version() + "+" + ref_build_digest()) continue;
    ++v.this_build;
    mine.push_back({path, *key, f, key->substr(slash + 1, at - slash - 1)});
  }
  if (sample > 0 && sample < mine.size()) {
    std::shuffle(mine.begin(), mine.end(), std::mt19937_64(std::random_device{}()));
    mine.resize(sample);
  }
  for (const auto& e : mine) {
    ++v.checked;
    ProblemPtr p;
    try {
      p = e.family->parse_id(e.problem_id);
    } catch (const std::exception& ex) {
      drop(e.path, e.key + ": problem id does not parse (" + std::string(ex.what()) + ")", v.unreadable);
      continue;
    }
    const TensorMap inputs = e.family->make_inputs(*p, case_seed(*e.family, *p));
    if (RefDiskCache::key(*e.family, *p, inputs) != e.key) {
      drop(e.path, e.key + ": the problem's inputs have another fingerprint than the key's", v.mismatched);
      continue;
    }
    const auto stored = cache.load(e.key);
    if (!stored) {
      drop(e.path, e.key + ": unreadable", v.unreadable);
      continue;
    }
    const References fresh = e.family->reference(*p, inputs);
    if (const std::string diff = difference(*stored, fresh); !diff.empty())
      drop(e.path, e.key + ": stored reference differs from the recomputed one (" + diff + ")", v.mismatched);
  }
  return v;
}

}  // namespace opcts
