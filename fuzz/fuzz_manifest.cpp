// Fuzzes Manifest::load (judge/manifest.hpp), including `extends:`. The input is split at
// the first line "#--8<--": what precedes it is the manifest loaded (m.yaml), what follows it
// is base.yaml, which the manifest may extend (without the marker base.yaml is a small valid
// manifest). Loaded manifests are then queried (find, stale, apply_expectation) with ids.
// Checks: no crash, UB, leak or unexpected exception; every entry has a match and a reason;
// tolerance entries set a finite, valid value; flaky reruns >= 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.hpp"
#include "judge/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opcts;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string_view base =
      "arch: base\nxfail:\n  - {match: 'sdpa.*/bf16_*', reason: known, strict: false}\n"
      "tolerance:\n  - {match: '*', reason: r, output: O, factor: 2}\n";
  static constexpr std::string_view marker = "#--8<--\n";
  if (const auto cut = bytes.find(marker); cut != std::string_view::npos) {
    base = bytes.substr(cut + marker.size());
    bytes = bytes.substr(0, cut);
  }
  opcts_fuzz::write_file("base.yaml", base);
  const std::string path = opcts_fuzz::write_file("m.yaml", bytes);

  Manifest m = Manifest::empty("none");
  if (!opcts_fuzz::accepts([&] { m = Manifest::load(path); })) return 0;

  std::vector<std::string> ids = {"sdpa.host_flash/bf16_b1_hq4_hkv4_sq6_sk4_d64_causal_lr",
                                  "cast.host_cvt/fp32_to_e4m3fn_sat", ""};
  for (const auto& e : m.entries()) {
    if (e.match.empty() && e.reason.empty()) opcts_fuzz::fail("entry without match and reason at " + e.source);
    if (e.reason.empty()) opcts_fuzz::fail("entry without a reason at " + e.source);
    for (const auto& v : {e.factor, e.atol, e.rtol, e.atol_eps})
      if (v && (!std::isfinite(*v) || *v < 0)) opcts_fuzz::fail("bad tolerance value at " + e.source);
    if (e.factor && *e.factor == 0) opcts_fuzz::fail("zero factor at " + e.source);
    if (e.kind == EntryKind::flaky && e.reruns < 0) opcts_fuzz::fail("negative reruns at " + e.source);
    ids.push_back(e.match);  // a glob tried as an id
  }
  for (const auto& id : ids) {
    for (EntryKind k : {EntryKind::skip, EntryKind::xfail, EntryKind::flaky, EntryKind::tolerance}) {
      const ManifestEntry* e = m.find(k, id, "O");
      if (e && e->kind != k) opcts_fuzz::fail("find returned an entry of another kind");
      if (k == EntryKind::xfail)
        for (Outcome o : {Outcome::PASS, Outcome::FAIL, Outcome::ERROR, Outcome::SKIP, Outcome::CRASH})
          for (const char* message : {"", "cuBLASLt status 15", "mismatches: 3 of 64"})
            for (const std::vector<Failure>& fs :
                 {std::vector<Failure>{}, std::vector<Failure>{{"O", FailureKind::exceeds_bound, 3, 1.5}},
                  std::vector<Failure>{{"", FailureKind::wrong_refusal, 0, 0}}})
              (void)apply_expectation(o, message, fs, e);
    }
  }
  (void)m.stale(ids);
  return 0;
}
