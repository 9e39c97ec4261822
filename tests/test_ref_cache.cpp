// The on-disk reference cache: round trip, key mismatch, truncation, and the worker's cache using it.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "app/builtins.hpp"
#include "runner/execute.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/suite.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;

References sample() {
  References r;
  r.exact["O"] = {1.0, -2.5, 3e-300};
  r.exact["lse"] = {-INFINITY, 0.5};
  r.lowp["O"] = {1.0, -2.5, 0.0};
  r.bound["y"] = {1e-3, 2e-3};
  ReductionStats& st = r.reduction["d"];
  st.terms = 4096;
  st.zero_mean = true;
  st.exact_term_bits = 6;
  st.abs_sum = {3.0, 0.5};
  st.sq_sum = {1.25, 1e-300};
  st.magnitude = {2.0, INFINITY};
  st.term_bits = 8;  // and the int4_mm fields: a known offset, the reference's own allowance
  st.ragged = true;
  st.offset = {-1e-3, 2e-4};
  st.extra_rel = 0x1p-50;
  st.extra_abs = 0x1p-140;
  r.bound_below["y"] = {5e-4, 0.0};
  Conservation& c = r.conservation["y@per_add"];
  c.group = 3;
  c.sum = {1.5, -2.0};
  c.below = {0.25, 0.0};
  c.above = {0.5, 1e-300};
  c.total_sum = -0.5, c.total_below = 0.25, c.total_above = INFINITY;
  r.energy["O@flash_fp32"] = {{{2.5, 1.25, 0.5}, {1e-300, 0.0, INFINITY}}, 3e-7, {0.5, 0.0, 2.0}};
  return r;
}

TEST(RefDiskCache, RoundTrip) {
  const RefDiskCache c(testutil::temp_dir());
  EXPECT_FALSE(c.load("sdpa/x@1"));
  c.store("sdpa/x@1", sample());
  const auto got = c.load("sdpa/x@1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->exact, sample().exact);
  EXPECT_EQ(got->lowp, sample().lowp);
  EXPECT_EQ(got->bound, sample().bound);
  EXPECT_EQ(got->reduction, sample().reduction);
  EXPECT_EQ(got->bound_below, sample().bound_below);
  EXPECT_EQ(got->conservation, sample().conservation);
  EXPECT_EQ(got->energy, sample().energy);
  EXPECT_FALSE(c.load("sdpa/x@2"));  // another reference version is another key
}

TEST(RefDiskCache, AnotherKeyInTheFileIsAMiss) {
  const RefDiskCache c(testutil::temp_dir());
  c.store("sdpa/a@1", sample());
  // Plant a's file where b's would be: a hash collision must not hand out a's references.
  fs::create_directories(fs::path(c.path_of("sdpa/b@1")).parent_path());
  fs::copy_file(c.path_of("sdpa/a@1"), c.path_of("sdpa/b@1"), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(c.load("sdpa/b@1"));
  EXPECT_TRUE(c.load("sdpa/a@1"));
}

TEST(RefDiskCache, TruncatedOrCorruptFilesAreMisses) {
  const RefDiskCache c(testutil::temp_dir());
  c.store("cast/t@1", sample());
  const std::string p = c.path_of("cast/t@1");
  const auto size = fs::file_size(p);
  for (uintmax_t cut : {uintmax_t{0}, uintmax_t{5}, size / 2, size - 1}) {
    c.store("cast/t@1", sample());
    fs::resize_file(p, cut);
    EXPECT_FALSE(c.load("cast/t@1")) << "cut at " << cut;
  }
  c.store("cast/t@1", sample());
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 20));
    f.put('\x7f');
  }
  EXPECT_FALSE(c.load("cast/t@1"));
  c.store("cast/t@1", sample());  // rewritten, valid again
  EXPECT_TRUE(c.load("cast/t@1"));
  EXPECT_FALSE(RefDiskCache("").load("cast/t@1"));  // disabled
}

// The cap evicts the least recently used files, and a load counts as a use: with room for
// about 2.5 files, storing a third evicts b (used long ago), not a (older, but just loaded).
TEST(RefDiskCache, TheCapEvictsTheLeastRecentlyUsed) {
  const std::string dir = testutil::temp_dir();
  const RefDiskCache probe(dir);
  probe.store("sdpa/probe@1", sample());
  const auto file_bytes = fs::file_size(probe.path_of("sdpa/probe@1"));
  fs::remove_all(dir);
  const RefDiskCache c(dir, file_bytes * 5 / 2);
  c.store("sdpa/a@1", sample());
  c.store("sdpa/b@1", sample());
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(c.path_of("sdpa/a@1"), now - std::chrono::seconds(30));
  fs::last_write_time(c.path_of("sdpa/b@1"), now - std::chrono::seconds(20));
  ASSERT_TRUE(c.load("sdpa/a@1"));  // a is now the most recently used
  c.store("sdpa/c@1", sample());
  EXPECT_TRUE(fs::exists(c.path_of("sdpa/a@1")));
  EXPECT_FALSE(fs::exists(c.path_of("sdpa/b@1")));
  EXPECT_TRUE(fs::exists(c.path_of("sdpa/c@1")));
  // Under the cap nothing goes; a reference larger than the cap is not stored at all.
  const RefDiskCache roomy(dir);
  roomy.store("sdpa/d@1", sample());
  EXPECT_TRUE(fs::exists(c.path_of("sdpa/a@1")));
  const RefDiskCache tiny(dir, 16);
  tiny.store("sdpa/e@1", sample());
  EXPECT_FALSE(fs::exists(c.path_of("sdpa/e@1")));
}

TEST(RefDiskCache, WorkerCacheLoadsWhatAnEarlierRunComputed) {
  const std::string dir = testutil::temp_dir();
  const Case c = case_from_id(builtin_registry(), "sdpa.host_flash/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask");
  ReferenceCache first(dir);
  const References computed = first.get(c).refs;
  EXPECT_EQ(first.stats().computed, 1);
  EXPECT_EQ(first.stats().loaded, 0);
  ReferenceCache second(dir);
  const References loaded = second.get(c).refs;
  EXPECT_EQ(second.stats().computed, 0);
  EXPECT_EQ(second.stats().loaded, 1);
  EXPECT_EQ(loaded.exact, computed.exact);
  EXPECT_EQ(loaded.lowp, computed.lowp);
  ReferenceCache off;  // no folder: computes
  off.get(c);
  EXPECT_EQ(off.stats().computed, 1);
}

// A reference is tied to the inputs it was computed from: the same problem with other inputs (an
// input generator that changed without a reference_version bump) has another key.
TEST(RefDiskCache, TheKeyHoldsTheInputsFingerprint) {
  const Case c = case_from_id(builtin_registry(), "sdpa.host_flash/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask");
  TensorMap in = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem));
  const std::string key = RefDiskCache::key(*c.family, *c.problem, in);
  EXPECT_EQ(key, RefDiskCache::key(*c.family, *c.problem,
                                   c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem))));
  EXPECT_EQ(key.rfind("sdpa/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask@", 0), 0u) << key;
  in.at("k").set(3, in.at("k").get(3) + 1);
  EXPECT_NE(key, RefDiskCache::key(*c.family, *c.problem, in));
}

// ---- The cache cannot lie (issue 33) ----

// The key held a hand-edited version string and the inputs' fingerprint: a reference changed
// without a bump, or built by another compiler, was served from a folder every checkout and
// build shares. The key now holds the digest the build derives from the references' sources.
TEST(RefDiskCache, TheKeyHoldsTheReferencesBuildDigest) {
  const std::string digest = ref_build_digest();
  EXPECT_EQ(digest.size(), 16u) << digest;
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
  const Case c = case_from_id(builtin_registry(), "sdpa.host_flash/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask");
  const TensorMap in = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem));
  const std::string key = RefDiskCache::key(*c.family, *c.problem, in);
  EXPECT_NE(key.find("@" + c.family->reference_version() + "+" + digest + "#"), std::string::npos) << key;
}

// The digest is the build's own: the script over a copy of the sources gives this build's
// digest, and another one once a reference's source changes by a byte.
TEST(RefDiskCache, ABuildDigestChangesWithTheReferencesSources) {
  const std::string dir = testutil::temp_dir();
  const fs::path src = OPCTS_SOURCE_DIR;
  for (const char* sub : {"refimpl", "core", "families"})
    if (fs::exists(src / sub)) fs::copy(src / sub, fs::path(dir) / sub, fs::copy_options::recursive);
  fs::create_directories(fs::path(dir) / "cmake");
  fs::copy_file(src / "cmake/isa_levels.cmake", fs::path(dir) / "cmake/isa_levels.cmake");
  const auto digest_of_tree = [&](const std::string& build) {
    const std::string out = dir + "/d.hpp";
    fs::remove(out);
    const auto r = testutil::sh("cmake -DSRC=" + dir + " -DOUT=" + out + " '-DBUILD=" + build + "' -P " +
                                (src / "cmake/ref_digest.cmake").string());
    EXPECT_EQ(r.status, 0) << r.output;
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto q = text.find('"');
    return q == std::string::npos ? text : text.substr(q + 1, 16);
  };
  const std::string a = digest_of_tree("g++ 12");
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(digest_of_tree("g++ 12"), a) << "the same tree and build give the same digest";
  EXPECT_NE(digest_of_tree("clang 15"), a) << "another compiler is another build";
  std::ofstream(dir + "/families/sdpa/reference.cpp", std::ios::app) << "\n";
  EXPECT_NE(digest_of_tree("g++ 12"), a) << "a changed reference source is another digest";
}

// On a full disk the cache renamed zero-byte entries into place (refused on every load, never
// reported). Stores are checked through fsync and close: nothing short is renamed into place,
// and the first failure of a process is reported, once. RLIMIT_FSIZE stands in for the full disk.
TEST(RefDiskCache, AStoreThatFailsLeavesNoEntryAndIsReportedOnce) {
  const std::string dir = testutil::temp_dir();
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);  // the child's stderr (a pipe: no file size limit applies)
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    signal(SIGXFSZ, SIG_IGN);
    const rlimit none{0, 0};
    setrlimit(RLIMIT_FSIZE, &none);
    const RefDiskCache c(dir + "/cache");
    for (const char* key : {"sdpa/a@1", "sdpa/b@1", "sdpa/c@1"}) c.store(key, sample());
    std::fflush(stderr);
    _exit(0);
  }
  close(err_pipe[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  close(err_pipe[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  size_t files = 0;
  for (auto it = fs::recursive_directory_iterator(dir + "/cache"); it != fs::recursive_directory_iterator(); ++it)
    files += it->is_regular_file();
  EXPECT_EQ(files, 0u) << "no empty, short or temporary entry is left";
  const auto first = err.find("cannot store a reference");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("cannot store a reference", first + 1), std::string::npos) << "reported once:\n" << err;
}

// An entry rewritten with other values and a valid checksum turned a PASS into a FAIL that
// --no-ref-cache and repro did not reproduce. `opcts cache verify` recomputes and finds it.
TEST(RefDiskCache, CacheVerifyFindsAndRemovesAnEntryThatLies) {
  const std::string dir = testutil::temp_dir();
  std::ofstream(dir + "/tiny.yaml") << testutil::kTinyCatalog;
  const std::string run = std::string(OPCTS_BINARY) + " run --arch host --tier smoke --catalog " + dir +
                          "/tiny.yaml --filter " + testutil::kTinyFilter + " --ref-cache " + dir + "/cache --results " +
                          dir + "/r.jsonl";
  ASSERT_EQ(testutil::sh(run).status, 0);
  const std::string verify = std::string(OPCTS_BINARY) + " cache verify --ref-cache " + dir + "/cache --sample 0";
  const auto clean = testutil::sh(verify);
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_NE(clean.output.find("3 recomputed: 0 differ"), std::string::npos) << clean.output;
  // Rewrite kTinyB's entry as a saboteur would: other values, the right key, a valid checksum.
  const Case c = case_from_id(builtin_registry(), testutil::kTinyB);
  const TensorMap in = c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem));
  const std::string key = RefDiskCache::key(*c.family, *c.problem, in);
  const RefDiskCache cache(dir + "/cache");
  auto refs = cache.load(key);
  ASSERT_TRUE(refs) << key;
  // Both references of O shifted alike (ref_relative's bound comes from their difference).
  refs->exact.at("O")[0] += 1;
  refs->lowp.at("O")[0] += 1;
  cache.store(key, *refs);
  ASSERT_NE(testutil::sh(run).status, 0) << "the lie turns a PASS into a FAIL";
  const auto found = testutil::sh(verify);
  EXPECT_EQ(found.status, 1) << found.output;
  EXPECT_NE(found.output.find(key + ": stored reference differs from the recomputed one (exact O); removed"),
            std::string::npos)
      << found.output;
  EXPECT_FALSE(fs::exists(cache.path_of(key)));
  EXPECT_EQ(testutil::sh(run).status, 0) << "recomputed";
}

}  // namespace
}  // namespace opcts
