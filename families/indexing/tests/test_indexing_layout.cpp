// The GPU backend's output guards (core/output_guard.hpp) and the indexing kernels' address arithmetic
// (families/indexing/cuda/indexing_layout.cuh), on the CPU.
#include <gtest/gtest.h>

#include <cstring>

#include "core/abi_impl.hpp"
#include "core/errors.hpp"
#include "core/output_guard.hpp"
#include "families/indexing/cuda/indexing_layout.cuh"
#include "families/indexing/indexing.hpp"

namespace opcts {
namespace {

using cuda::layout::Pair;

TEST(OutputGuard, LayoutAndCanary) {
  const GuardLayout g =
      guard_layout(OutputSpec{.name = "out", .dtype = DType::bf16, .shape = {3}, .misalign_bytes = 2}, 6);
  EXPECT_EQ(g.before, kGuardBytes + 2);  // a 256-aligned base + 258: 2- but not 4-byte aligned
  EXPECT_EQ(g.total(), kGuardBytes + 2 + 6 + kGuardBytes);
  const std::vector<unsigned char> img = guarded_image(DType::bf16, g, 0xFF);
  // -0.0 in every 2-byte slot on both sides, the tensor poisoned.
  EXPECT_EQ(img[g.before - 2], 0x00);
  EXPECT_EQ(img[g.before - 1], 0x80);
  EXPECT_EQ(img[g.before], 0xFF);
  EXPECT_EQ(img[g.before + 6], 0x00);
  EXPECT_EQ(img[g.before + 7], 0x80);
  EXPECT_EQ(guard_breach("out", DType::bf16, img.data(), g), "");
  EXPECT_THROW(guard_layout(OutputSpec{.name = "out", .dtype = DType::fp32, .shape = {3}, .misalign_bytes = 2}, 12),
               std::logic_error);  // half an element
  EXPECT_EQ(guarded_image(DType::int32, guard_layout(OutputSpec{"out", DType::int32, {1}}, 4), 0)[0], kGuardByte);
}

TEST(OutputGuard, APairedPlusZeroPastTheEndIsSeen) {
  const GuardLayout g = guard_layout(OutputSpec{"out", DType::fp16, {3}}, 6);
  std::vector<unsigned char> img = guarded_image(DType::fp16, g, 0xFF);
  // The element past the end took a +0: -0.0 (00 80) became +0.0 (00 00).
  img[g.before + 7] = 0x00;
  EXPECT_EQ(guard_breach("out", DType::fp16, img.data(), g),
            "bytes [+0, +2) past the end of 'out' hold 00 00, not the guard's 00 80");
  std::vector<unsigned char> lo = guarded_image(DType::fp16, g, 0xFF);
  lo[g.before - 1] = 0x00;  // the element before the start
  EXPECT_NE(guard_breach("out", DType::fp16, lo.data(), g).find("bytes [-2, 0) before the start of 'out'"),
            std::string::npos);
}

// An fp16 "impl" that writes +0.0 into every element of out and, with impl_data set, adds +0
// to the element past the end in fp16 arithmetic, as a paired 16-bit atomic without the ends
// check does: that leaves any canary but -0.0 unchanged bit for bit.
opcts_status write_zeros(const void* impl_data, const opcts_run_args* args, opcts_report*) {
  const opcts_tensor& out = args->tensors[args->n_tensors - 1];
  auto* h = static_cast<uint16_t*>(out.data);
  std::memset(h, 0, static_cast<size_t>(2 * out.shape[0]));
  if (impl_data)
    h[out.shape[0]] = static_cast<uint16_t>(encode(DType::fp16, decode(DType::fp16, h[out.shape[0]]) + 0.0));
  return OPCTS_OK;
}

TEST(OutputGuard, TheHostBackendFailsAPlusZeroPastTheEnd) {
  static const int past_end = 1;
  for (const int64_t mis : {0, 2})
    for (const void* data : {static_cast<const void*>(nullptr), static_cast<const void*>(&past_end)}) {
      opcts_impl_desc d{};
      d.struct_size = sizeof d;
      d.name = "test.zeros";
      d.run = write_zeros;
      d.impl_data = data;
      const std::vector<OutputSpec> outs{{.name = "out", .dtype = DType::fp16, .shape = {5}, .misalign_bytes = mis}};
      const opcts_arch arch{};
      if (!data) {
        EXPECT_EQ(host_abi_backend().run(d, nullptr, {}, outs, arch, 0, nullptr, nullptr, nullptr).at("out").get(4),
                  0.0);
        continue;
      }
      try {
        host_abi_backend().run(d, nullptr, {}, outs, arch, 0, nullptr, nullptr, nullptr);
        ADD_FAILURE() << "a +0 past the end passed (misalign " << mis << ")";
      } catch (const ContractBreach& e) {
        EXPECT_NE(
            std::string(e.what()).find("test.zeros wrote outside its output: bytes [+0, +2) past the end of 'out'"),
            std::string::npos)
            << e.what();
        EXPECT_EQ(e.kind, FailureKind::written_outside);
        EXPECT_EQ(e.output, "out");
      }
      // Where the caller collects breaches (runner/execute.cpp), the outputs come back too, so
      // their values are judged besides the breach.
      std::vector<GuardBreach> breaches;
      EXPECT_EQ(host_abi_backend().run(d, nullptr, {}, outs, arch, 0, nullptr, nullptr, &breaches).at("out").get(4),
                0.0);
      ASSERT_EQ(breaches.size(), 1u);
      EXPECT_EQ(breaches[0].output, "out");
      EXPECT_NE(breaches[0].message.find("past the end of 'out'"), std::string::npos) << breaches[0].message;
    }
}

TEST(IndexingLayout, PairedAtomicsStayInsideUnlessPlanted) {
  // A 4-byte aligned element e pairs with e + 1, else with e − 1; never past either end.
  EXPECT_EQ(cuda::layout::pair_of(0, 3, true, false), Pair::starts_here);
  EXPECT_EQ(cuda::layout::pair_of(2, 3, true, false), Pair::scalar);      // the last element
  EXPECT_EQ(cuda::layout::pair_of(2, 3, true, true), Pair::starts_here);  // planted: reaches element 3
  EXPECT_EQ(cuda::layout::pair_of(0, 4, false, false), Pair::scalar);     // misaligned first element
  EXPECT_EQ(cuda::layout::pair_of(0, 4, false, true), Pair::ends_here);   // planted: reaches element -1
  EXPECT_EQ(cuda::layout::pair_of(0, 1, true, false), Pair::scalar);      // numel 1
  // Every smoke problem the planted pair_past_end row takes makes some add leave the tensor:
  // the end element takes adds (all_last / strided, all_first) and sits where the pair leaves.
  for (int64_t n : {1, 2, 3, 32, 33})
    for (bool mis : {false, true})
      for (auto dist : {indexing::Dist::all_first, indexing::Dist::all_last}) {
        const indexing::Problem p{.dtype = DType::bf16, .n = n, .m = 64, .dist = dist, .misalign = mis};
        const int64_t e = dist == indexing::Dist::all_last ? n - 1 : 0;
        const bool aligned4 = (e + (mis ? 1 : 0)) % 2 == 0;
        const Pair pair = cuda::layout::pair_of(e, n, aligned4, true);
        const bool leaves = (pair == Pair::starts_here && e + 1 >= n) || (pair == Pair::ends_here && e == 0);
        EXPECT_EQ(indexing::planted_bug_cannot_show(p, indexing::PlantedBug::pair_past_end).empty(), leaves)
            << n << " " << mis << " " << static_cast<int>(dist);
      }
}

TEST(IndexingLayout, OffsetsWrapOnlyIn32Bits) {
  const int64_t n = 1048640, inner = 4096;  // 2^32 + 2^18 elements
  EXPECT_EQ(cuda::layout::gather_offset(0, n - 1, 5, n, inner, false), (n - 1) * inner + 5);
  EXPECT_EQ(cuda::layout::gather_offset(0, n - 1, 5, n, inner, true), ((n - 1) * inner + 5) % (int64_t{1} << 32));
  EXPECT_EQ(cuda::layout::gather_offset(0, 1000, 5, n, inner, true), 1000 * inner + 5);  // below 2^32: the same
  const auto t = cuda::layout::term_of((2 * 7 + 3) * 5 + 4, 7, 5);
  EXPECT_EQ(t.o, 2);
  EXPECT_EQ(t.j, 3);
  EXPECT_EQ(t.k, 4);
  EXPECT_EQ(cuda::layout::destination(t, 6, 9, 5), (2 * 9 + 6) * 5 + 4);
}

}  // namespace
}  // namespace opcts
