// The on-disk reference cache: round trip, key mismatch, truncation, and the worker's cache using it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "app/builtins.hpp"
#include "runner/execute.hpp"
#include "runner/ref_disk_cache.hpp"
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
  r.bound_below["y"] = {5e-4, 0.0};
  Conservation& c = r.conservation["y@per_add"];
  c.group = 3;
  c.sum = {1.5, -2.0};
  c.below = {0.25, 0.0};
  c.above = {0.5, 1e-300};
  c.total_sum = -0.5, c.total_below = 0.25, c.total_above = INFINITY;
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
  EXPECT_EQ(key, RefDiskCache::key(*c.family, *c.problem, c.family->make_inputs(*c.problem, case_seed(*c.family, *c.problem))));
  EXPECT_EQ(key.rfind("sdpa/fp32_b1_hq2_hkv1_sq3_sk5_d8_nomask@", 0), 0u) << key;
  in.at("k").set(3, in.at("k").get(3) + 1);
  EXPECT_NE(key, RefDiskCache::key(*c.family, *c.problem, in));
}

}  // namespace
}  // namespace opcts
