// The CUDA sdpa rows' determinism claim on the CPU: sdpa_kernel_deterministic_tactic is asked with the
// problem's ABI parameters alone (no tensors), and must name the kernel the run takes, whose key
// block decides whether dQ's fp32 atomics can land in another order (more than two blocks a row).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "app/builtins.hpp"
#if OPCTS_HAVE_CUDNN
#include "families/sdpa/cuda/sdpa_cudnn.hpp"
#endif
#include "core/abi_impl.hpp"
#include "core/arch.hpp"
#include "families/sdpa/cuda/sdpa_fp8.cuh"
#include "families/sdpa/cuda/sdpa_launch.hpp"
#include "families/sdpa/sdpa.hpp"
#include "numerics/dtype.hpp"
#include "numerics/minifloat_bits.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using Tactics = std::vector<std::string>;

// cuda.flash's tactics for a problem (sdpa_rows.cpp flash_backward_tactics).
Tactics flash_tactics(const Problem& p) { return builtin_registry().impl("cuda.flash")->tactics(p); }

// The claim for one of cuda.flash's tactics (null: the kernel the backward picks).
int32_t flash_deterministic(const char* id, const char* tactic) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto c = abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id(id)));
  static constexpr cuda::SdpaRow kFlash{cuda::SdpaKernel::flash};
  return cuda::sdpa_kernel_deterministic_tactic(&kFlash, &c, tactic);
}

int32_t flash_deterministic(const char* id) {
  const Family& f = *builtin_registry().family("sdpa");
  const ProblemPtr p = f.parse_id(id);
  const auto c = abi_struct<opcts_sdpa_params>(f.abi_params(*p));
  static constexpr cuda::SdpaRow kFlash{cuda::SdpaKernel::flash};
  return cuda::sdpa_kernel_deterministic_tactic(&kFlash, &c, nullptr);
}

// A mask tensor sends the backward to the FMA kernel (32 keys a block): Sk 77 is three blocks
// there, so dQ is not reproducible, although the tensor-core kernel (64 keys) would take it in
// two. Seen on an H100 with --bitwise (2026-12-05), when the claim looked at the mask's pointer.
TEST(SdpaCudaGlue, TheBackwardsDeterminismFollowsTheKernelItRuns) {
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_amask_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_bmask_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk64_d64_nomask_amask_bwd"), 1);  // two blocks of 32
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_bwd"), 1);        // two blocks of 64
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk129_d64_nomask_bwd"), 0);       // three blocks of 64
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask"), 1);            // the forward
}

// Each tactic's claim is its kernel's: Sk 100 is two blocks of the tensor-core kernels' 64 keys
// (tc, tc2) but four of the FMA kernel's 32, which the fma tactic runs on the same problem.
TEST(SdpaCudaGlue, EachBackwardTacticClaimsDeterminismForItsOwnKernel) {
  const char* id = "bf16_b1_hq4_hkv2_sq64_sk100_d128_nomask_bwd";
  EXPECT_EQ(flash_deterministic(id, nullptr), 1);
  EXPECT_EQ(flash_deterministic(id, "tc"), 1);
  EXPECT_EQ(flash_deterministic(id, "tc2"), 1);
  EXPECT_EQ(flash_deterministic(id, "fma"), 0);
  EXPECT_EQ(flash_deterministic("bf16_b1_hq4_hkv2_sq64_sk64_d128_nomask_bwd", "fma"), 1);  // two blocks of 32
  EXPECT_EQ(flash_deterministic(id, "h3"), 0);  // no kernel's name: no claim (run refuses it)
  // Through the impl, as --bitwise and --capture ask it: the case's tactic reaches the claim.
  const Family& f = *builtin_registry().family("sdpa");
  const Impl& flash = *builtin_registry().impl("cuda.flash");
  const ProblemPtr p = f.parse_id(id);
  EXPECT_TRUE(flash.deterministic(*p, "tc"));
  EXPECT_FALSE(flash.deterministic(*p, "fma"));
  // hip.flash runs the same kernels: the same tactics and claims.
  const Impl& hip = *builtin_registry().impl("hip.flash");
  EXPECT_EQ(hip.tactics(*p), flash.tactics(*p));
  EXPECT_FALSE(hip.deterministic(*p, "fma"));
}

// cuda.flash's invariance claims (measured on an H100: docs/status/sm90.md (n)): its forward on
// the dense and varlen layouts over every axis, fp8 over the batch axes only (the kernel runs no
// varlen fp8, so a packed twin would be declined); nothing on a backward or paged problem.
TEST(SdpaCudaGlue, TheFlashForwardClaimsItsInvarianceAxes) {
  const Family& f = *builtin_registry().family("sdpa");
  const Impl& flash = *builtin_registry().impl("cuda.flash");
  const auto axes = [&](const char* id) { return flash.invariant_axes(*f.parse_id(id)); };
  const std::vector<InvarianceAxis> all{InvarianceAxis::batch_size, InvarianceAxis::batch_position,
                                        InvarianceAxis::packing};
  EXPECT_EQ(axes("bf16_b3_hq4_hkv2_sq70_sk130_d64_causal_lr"), all);
  EXPECT_EQ(axes("bf16_b3_hq4_hkv2_sq70r3_sk130r3_d64_causal_lr_varlen"), all);
  EXPECT_EQ(axes("bf16_b2_hq4_hkv2_sq64_sk64_d64_nomask_fp8qkvh"),
            (std::vector<InvarianceAxis>{InvarianceAxis::batch_size, InvarianceAxis::batch_position}));
  EXPECT_TRUE(axes("bf16_b3_hq4_hkv2_sq70r3_sk130r3_d64_causal_lr_varlen_bwd").empty());
  EXPECT_TRUE(axes("bf16_b4_hq4_hkv2_sq1x20x0x12_sk33x40x9x6_d64_causal_lr_paged_page16").empty());
}

// The tactics cuda.flash lists for a backward problem are the kernels its dispatch takes: tc (and
// tc2 at D = 96 and 128) exactly where sdpa_flash_backward_takes_tc holds for the problem's
// parameters (the kernel's own predicate, which the run checks again: a tactic it contradicts is
// an internal error), fma wherever the backward runs; a forward problem lists none. Every problem
// of every sdpa catalog, so that a feature added to one predicate and not the other fails here.
TEST(SdpaCudaGlue, TheBackwardsTacticsAreTheKernelsItsDispatchTakes) {
  int tc = 0, fma_only = 0, none = 0;
  for (const auto& e : load_catalogs(builtin_registry(), {testutil::cases_dir().string()})) {
    if (e.family->name() != "sdpa") continue;
    const auto& p = e.problem->as<sdpa::Problem>();
    const Tactics got = flash_tactics(*e.problem);
    if (p.direction != sdpa::Direction::backward) {
      EXPECT_TRUE(got.empty()) << e.problem_id;
      continue;
    }
    if (got.empty()) {
      ++none;
      continue;
    }
    const auto c = abi_struct<opcts_sdpa_params>(e.family->abi_params(*e.problem));
    const bool takes_tc = cuda::sdpa_flash_backward_takes_tc(cuda::sdpa_backward_params_of(c));
    const bool d96_128 = p.head_dim == 96 || p.head_dim == 128;
    const Tactics want = !takes_tc ? Tactics{"fma"} : d96_128 ? Tactics{"tc", "tc2", "fma"} : Tactics{"tc", "fma"};
    EXPECT_EQ(got, want) << e.problem_id;
    ++(takes_tc ? tc : fma_only);
  }
  EXPECT_GE(tc, 50);
  EXPECT_GE(fma_only, 50);
  EXPECT_GE(none, 1);  // fp32 backward problems: the flash backward is fp16/bf16
}

// cuDNN's claim (sdpa_cudnn_row_deterministic): not the backward (dQ's atomics) nor a decode
// forward (one query row: lse differed by a bit on two H100s), every other forward.
TEST(SdpaCudaGlue, CudnnClaimsNoDeterminismForBackwardOrDecode) {
  const Family& f = *builtin_registry().family("sdpa");
  const Impl* cudnn = builtin_registry().impl("cuda.cudnn");
  ASSERT_NE(cudnn, nullptr);
  const ProblemPtr fwd = f.parse_id("bf16_b1_hq32_hkv8_sq4_sk4096_d128_nomask");
  const ProblemPtr bwd = f.parse_id("bf16_b1_hq4_hkv4_sq64_sk512_d64_causal_ul_bwd");
  // Without cuDNN in the build the row has no claim callback (every case SKIPs there).
  if (cudnn->deterministic(*bwd, "c0")) GTEST_SKIP() << "built without cuDNN: cuda.cudnn has no claim";
  EXPECT_TRUE(cudnn->deterministic(*fwd, "c0"));
  EXPECT_FALSE(cudnn->deterministic(*f.parse_id("bf16_b1_hq32_hkv8_sq1_sk4096_d128_nomask"), "c0"));
}

// A paged problem's ABI parameters as the kernels' (sdpa_params_of): queries THD, the caches'
// geometry and order, the decode kernel's split scratch; and which row takes the layout.
TEST(SdpaCudaGlue, PagedParametersReachTheDecodeKernelOnly) {
  const Family& f = *builtin_registry().family("sdpa");
  const ProblemPtr p = f.parse_id("bf16_b3_hq4_hkv2_sq1x2x1_sk300x9x600_d64_causal_lr_paged_page16_hnd");
  const auto c = abi_struct<opcts_sdpa_params>(f.abi_params(*p));
  const cuda::SdpaParams k = cuda::sdpa_params_of(c);
  EXPECT_EQ(k.page_size, 16);
  EXPECT_TRUE(k.kv_hnd);
  EXPECT_FALSE(k.varlen);
  EXPECT_EQ(k.max_pages_per_seq, 38);  // ceil(600 / 16)
  EXPECT_EQ(k.q_strides.batch, 0);
  EXPECT_EQ(k.q_strides.seq, 4 * 64);  // token-major: a token steps Hq·D
  const char* why = nullptr;
  EXPECT_TRUE(cuda::sdpa_flash_decode_supports(k, &why)) << why;
  // Three splits of 256 keys for the longest sequence, over at most 3 · 2 query tokens.
  EXPECT_EQ(cuda::sdpa_flash_decode_scratch_bytes(k), 4 * 3 * (3 * 2) * 4 * (64 + 2));

  char reason[256] = {};
  static constexpr cuda::SdpaRow kDecode{cuda::SdpaKernel::flash_decode}, kFlash{cuda::SdpaKernel::flash};
  const opcts_arch arch{};
  EXPECT_EQ(cuda::sdpa_kernel_supports(&kFlash, &c, &arch, reason, sizeof reason), 0);
  EXPECT_NE(std::string(reason).find("cuda.flash_decode"), std::string::npos) << reason;
  const auto dense = abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b1_hq4_hkv2_sq1_sk300_d64_nomask")));
  EXPECT_EQ(cuda::sdpa_kernel_supports(&kDecode, &dense, &arch, reason, sizeof reason), 0);
  EXPECT_NE(std::string(reason).find("paged layout only"), std::string::npos) << reason;
}

// A negative case runs whatever supports() says, so run() must refuse a layout or feature its
// kernel does not read before the kernel starts: cuda.math handed a paged cache with a corrupt
// seqused_k or block table computed from the cache as if it were dense and "accepted" both (the
// H100 default tier, 2026-12-06). Refused here with no tensors and no device: nothing ran.
TEST(SdpaCudaGlue, RunRefusesWhatSupportsDeclinesBeforeAKernelStarts) {
  const Family& f = *builtin_registry().family("sdpa");
  const char* const ids[] = {"bf16_b2_hq2_hkv2_sq1r2_sk20x40_d64_nomask_paged_page16_corrupt_seqused_k",
                             "bf16_b2_hq2_hkv2_sq1r2_sk20x40_d64_nomask_paged_page16_corrupt_block_table",
                             "bf16_b3_hq2_hkv2_sq3x2x4_sk5x9x6_d64_nomask_varlen_corrupt_cu_seqlens_k"};
  static constexpr cuda::SdpaRow kMath{cuda::SdpaKernel::math}, kDecode{cuda::SdpaKernel::flash_decode};
  for (const char* id : ids) {
    const auto c = abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id(id)));
    for (const cuda::SdpaRow* row : {&kMath, &kDecode}) {
      if (row == &kDecode && std::string(id).find("paged") != std::string::npos) continue;  // decode's layout
      opcts_run_args a{};
      a.struct_size = sizeof a, a.params = &c, a.device = -1;
      opcts_report r{};
      EXPECT_EQ(cuda::sdpa_kernel_run(row, &a, &r), OPCTS_UNSUPPORTED) << id;
      char reason[256] = {};
      const opcts_arch arch{};
      EXPECT_EQ(cuda::sdpa_kernel_supports(row, &c, &arch, reason, sizeof reason), 0) << id;
      EXPECT_STREQ(r.message, reason) << id;  // the same refusal, said the same way
    }
  }
}

// A padded varlen problem's index tensors reach the flash kernels (seqused_k, the packed key rows),
// and a paged problem's tensors, which a negative case hands cuda.flash without asking its
// supports, make the flash kernel refuse instead of reading a null cu_seqlens_k on the device.
TEST(SdpaCudaGlue, VarlenPaddingReachesTheFlashKernelAndPagedTensorsAreRefused) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto c =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b2_hq4_hkv2_sq3x4_sk5x6_d64_nomask_varlen_padk2")));
  alignas(16) static unsigned char buf[4][15 * 4 * 64 * 2];  // q, k, v, O: host stand-ins, never read
  int32_t cu_q[3] = {0, 3, 7}, cu_k[3] = {0, 7, 15}, used[2] = {5, 6};
  const int64_t q_shape[3] = {7, 4, 64}, k_shape[3] = {15, 2, 64}, one[1] = {3}, two[1] = {2};
  const auto tensor = [](const char* name, void* data, const int64_t* shape, int32_t ndim) {
    opcts_tensor t{};
    t.name = name, t.data = data, t.shape = shape, t.ndim = ndim;
    return t;
  };
  std::vector<opcts_tensor> t = {tensor("q", buf[0], q_shape, 3),      tensor("k", buf[1], k_shape, 3),
                                 tensor("v", buf[2], k_shape, 3),      tensor("O", buf[3], q_shape, 3),
                                 tensor("cu_seqlens_q", cu_q, one, 1), tensor("cu_seqlens_k", cu_k, one, 1),
                                 tensor("seqused_k", used, two, 1)};
  const cuda::SdpaParams k = cuda::sdpa_params_of(c, t.data(), static_cast<int32_t>(t.size()));
  EXPECT_EQ(k.seqused_k, used);
  EXPECT_EQ(k.total_k, 15);
  EXPECT_EQ(k.total_q, 7);
  const char* why = nullptr;
  EXPECT_TRUE(cuda::sdpa_flash_supports(k, &why)) << why;
  // A paged negative case's tensors: no cu_seqlens_k, a block table.
  t[5] = tensor("block_table", cu_k, one, 1);
  const cuda::SdpaParams paged = cuda::sdpa_params_of(c, t.data(), static_cast<int32_t>(t.size()));
  EXPECT_FALSE(cuda::sdpa_flash_supports(paged, &why));
  EXPECT_NE(std::string(why).find("cuda.flash_decode"), std::string::npos) << why;
}

// cuda.cudnn takes the packed layouts (ABI 1.3), and what cuDNN's ragged and paged graphs cannot
// express is a SKIP naming it before anything touches the device: a page size that is not a power
// of two (cuDNN 9.14.0 refused 5 and 7 with BAD_PARAM on the H200), a softcap (it disables the
// padding mask a ragged graph needs), causal_upper_left with a window (two alignments).
TEST(SdpaCudaGlue, CudnnTakesPackedLayoutsAndSkipsWhatItsGraphsCannotExpress) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto* cudnn = dynamic_cast<const AbiImpl*>(builtin_registry().impl("cuda.cudnn"));
  ASSERT_NE(cudnn, nullptr);
  EXPECT_EQ(cudnn->abi_minor(), 9u);
  ArchInfo sm90;
  sm90.name = "sm90", sm90.backend = "cuda", sm90.caps = {"mma_sync_bf16"}, sm90.compute_major = 9;
  const auto reason = [&](const char* id) { return cudnn->supports(*f.parse_id(id), sm90).reason; };
  const std::string page7 = reason("bf16_b5_hq4_hkv2_sq1r2x0x33x2_sk15x300x9x48x0_d64_nomask_paged_page7");
  if (page7.find("without cuDNN") != std::string::npos) GTEST_SKIP() << page7;
  EXPECT_NE(page7.find("power-of-two page sizes"), std::string::npos) << page7;
  const std::string cap = reason("bf16_b2_hq2_hkv2_sq3x2_sk5x9_d64_nomask_cap50_varlen");
  EXPECT_NE(cap.find("padding mask"), std::string::npos) << cap;
  const std::string ul = reason("bf16_b2_hq2_hkv2_sq3x2_sk5x9_d64_causal_ul_win3x0_varlen");
  EXPECT_NE(ul.find("two diagonal alignments"), std::string::npos) << ul;
}

// Chunked-local attention reaches cuda.flash (ABI 1.4: SdpaParams::chunk from the struct's
// attention_chunk), its backward on the FMA kernel (a chunk is no band the tensor-core kernel's
// tile limits express); the two-block backward row and the other kernels decline it.
TEST(SdpaCudaGlue, ChunksReachCudaFlashAndItsFmaBackward) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto c =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_chunk17")));
  EXPECT_EQ(cuda::sdpa_params_of(c).chunk, 17);
  const auto bwd =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_chunk17_bwd")));
  EXPECT_EQ(cuda::sdpa_backward_params_of(bwd).fwd.chunk, 17);
  static constexpr cuda::SdpaRow kMath{cuda::SdpaKernel::math};
  const opcts_arch arch{};
  char reason[256] = {};
  EXPECT_EQ(cuda::sdpa_kernel_supports(&kMath, &bwd, &arch, reason, sizeof reason), 0);
  EXPECT_NE(std::string(reason).find("chunked-local attention"), std::string::npos) << reason;
  const auto* flash = dynamic_cast<const AbiImpl*>(builtin_registry().impl("cuda.flash"));
  ASSERT_NE(flash, nullptr);
  EXPECT_GE(flash->abi_minor(), 4u);
}

// Attention sinks (ABI 1.5: SdpaParams::has_sinks from the struct's sinks, the "sinks" and
// "dsinks" tensors) reach cuda.flash, forward and backward (every backward kernel: P comes from the
// forward's lse, dsinks from a pass of its own), and cuda.flash_decode's combine. cuda.math
// (which declares 1.7 for query-broadcast masks) declines them in supports; every other CUDA row
// declares a minor below 1.5, so the runner SKIPs sink problems there before asking (cuda.cudnn: below).
// The kernel rows the feature tests ask (sdpa_rows.cpp's) and their supports callback, the reason
// of the last refusal in `reason`.
constexpr cuda::SdpaRow kFlashRow{cuda::SdpaKernel::flash}, kMathRow{cuda::SdpaKernel::math},
    kDecodeRow{cuda::SdpaKernel::flash_decode};
struct RowSupports {
  char reason[256] = {};
  int32_t operator()(const cuda::SdpaRow& row, const opcts_sdpa_params& c) {
    const opcts_arch arch{};
    reason[0] = '\0';
    return cuda::sdpa_kernel_supports(&row, &c, &arch, reason, sizeof reason);
  }
};

// The ABI gap the runner finds between an impl and a problem ("" where it hands the problem over).
std::string gap(const char* impl, const Problem& p) {
  const Impl* i = builtin_registry().impl(impl);
  return i ? i->abi_gap(p) : std::string("no impl ") + impl;
}

// Every CUDA sdpa row but cuda.flash, cuda.flash_decode, cuda.math and cuda.cudnn (1.9; their supports decline
// what it does not run, which the tests check) declares at most `minor`, so the runner SKIPs p
// there, naming `abi` ("ABI 1.6").
void expect_other_cuda_rows_skip(const Problem& p, uint32_t minor, const char* abi) {
  for (const Impl* i : builtin_registry().impls_of("sdpa")) {
    const std::string name(i->name());
    if (name.rfind("cuda.", 0) != 0 || name == "cuda.flash" || name == "cuda.flash_decode" || name == "cuda.math" ||
        name == "cuda.cudnn")  // 1.9: CudnnTakesSinksAlibiDbiasAndFp8AsTheFrontendBuildsThem
      continue;
    const auto* a = dynamic_cast<const AbiImpl*>(i);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_LE(a->abi_minor(), minor) << name;
    EXPECT_NE(i->abi_gap(p).find(abi), std::string::npos) << name << ": " << i->abi_gap(p);
  }
}

#if OPCTS_HAVE_CUDNN
// cuda.cudnn declares 1.9 and builds the frontend's sink token (9.13.0+, dense, s_q > 1), its
// alibi_mask (per head, top-left causal, Sq = Sk), dBias (9.5.0+, not of a one-row bias: measured
// out-of-bounds writes), a one-row bias and the per-tensor fp8 forward with an e4m3 O
// (9.1.0+, top-left masks); what its graphs cannot express is a SKIP naming it (the version
// gates by the loaded cuDNN's number), block masks among them.
// The scale_s cuda.cudnn gives its fp8 graph is the one O's model (and host.normalised_p_fp8)
// takes: a change to one side alone would judge the graph under another arithmetic.
static_assert(cuda::kCudnnFp8ScaleS == sdpa::kFp8ScaleS, "cuDNN's scale_s and the fp8_p_normalised model's differ");

TEST(SdpaCudaGlue, CudnnTakesSinksAlibiDbiasAndFp8AsTheFrontendBuildsThem) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto params = [&](const char* id) {
    return cuda::sdpa_backward_params_of(abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id(id))));
  };
  const auto why = [&](const char* id, bool backward) {
    const cuda::SdpaBackwardParams bp = params(id);
    std::string w;
    cuda::sdpa_cudnn_supports(bp.fwd, backward, &w, bp.dbias);
    return w;
  };
  const int64_t v = cuda::sdpa_cudnn_version();
  const std::string sink = why("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_sink", false);
  if (v >= 91300) EXPECT_EQ(sink, "");
  else EXPECT_NE(sink.find("< 9.13.0"), std::string::npos) << sink;
  if (v >= 91300) {
    EXPECT_NE(why("bf16_b1_hq4_hkv2_sq1_sk48_d64_nomask_sink", false).find("s_q = 1"), std::string::npos);
    EXPECT_NE(why("bf16_b2_hq2_hkv2_sq3x2_sk5x9_d64_nomask_sink_varlen", false).find("dense layouts"),
              std::string::npos);
  }
  EXPECT_EQ(why("bf16_b1_hq4_hkv2_sq48_sk48_d64_causal_lr_alibi", true), "");
  EXPECT_NE(why("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_alibi", false).find("seq_q == seq_k"), std::string::npos);
  EXPECT_NE(why("bf16_b1_hq4_hkv2_sq48_sk48_d64_nomask_alibi", false).find("causal"), std::string::npos);
  EXPECT_NE(why("bf16_b2_hq4_hkv2_sq48_sk48_d64_causal_lr_alibib", false).find("[1, H, 1, 1]"), std::string::npos);
  const std::string dbias = why("bf16_b2_hq4_hkv2_sq40_sk48_d64_nomask_amaskh_dbias_bwd", true);
  if (v >= 90500) EXPECT_EQ(dbias, "");
  else EXPECT_NE(dbias.find("< 9.5.0"), std::string::npos) << dbias;
  EXPECT_NE(why("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_chunk17", false).find("chunks"), std::string::npos);
  // A one-row bias: forward and backward run; its dbias (measured out-of-bounds writes) is declined.
  EXPECT_EQ(why("bf16_b2_hq4_hkv2_sq40_sk72_d64_nomask_amaskk", false), "");
  EXPECT_EQ(why("bf16_b2_hq4_hkv2_sq40_sk72_d64_nomask_amaskk_bwd", true), "");
  if (v >= 90500)
    EXPECT_NE(why("bf16_b2_hq4_hkv2_sq48_sk48_d64_nomask_amaskbhk_dbias_bwd", true).find("broadcast over the queries"),
              std::string::npos);
  EXPECT_EQ(gap("cuda.cudnn", *f.parse_id("bf16_b2_hq4_hkv2_sq96_sk160_d64_nomask_blk16x16")), "");
  EXPECT_NE(why("bf16_b2_hq4_hkv2_sq96_sk160_d64_nomask_blk16x16", false).find("block mask"), std::string::npos);
  // fp8: q, k, v of one format with per-tensor descales and an e4m3 O, top-left masks only.
  for (const char* id :
       {"bf16_b2_hq4_hkv2_sq64_sk64_d64_causal_lr_fp8qkvo", "bf16_b2_hq4_hkv2_sq64_sk64_d128_nomask_fp8qkve5m2o",
        "bf16_b2_hq4_hkv2_sq32_sk96_d64_causal_ul_fp8qkvo"}) {
    const std::string w = why(id, false);
    if (v >= 90100 && v != 91000) EXPECT_EQ(w, "") << id;
    else EXPECT_NE(w, "") << id;
    EXPECT_EQ(gap("cuda.cudnn", *f.parse_id(id)), "") << id;
  }
  EXPECT_NE(why("bf16_b2_hq4_hkv2_sq32_sk96_d64_causal_lr_fp8qkvo", false).find("bottom-right"), std::string::npos);
  EXPECT_NE(why("bf16_b2_hq4_hkv2_sq64_sk64_d64_nomask_fp8qkvho", false).find("per-tensor"), std::string::npos);
  EXPECT_NE(why("bf16_b2_hq4_hkv2_sq64_sk64_d64_nomask_fp8qkv", false).find("16-bit O"), std::string::npos);
  EXPECT_NE(why("bf16_b2_hq8_hkv2_sq26_sk80_d64_causal_lr_fp8kv", false).find("all fp8"), std::string::npos);
  const cuda::SdpaParams o8 = params("bf16_b2_hq4_hkv2_sq64_sk64_d64_nomask_fp8qkvo").fwd;
  EXPECT_TRUE(o8.fp8_out);
  float scale = 0;
  opcts_tensor t{};
  t.name = "o_scale", t.data = &scale;
  const auto c =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b2_hq4_hkv2_sq64_sk64_d64_nomask_fp8qkvo")));
  EXPECT_EQ(cuda::sdpa_params_of(c, &t, 1).o_scale, &scale);
}
#endif

TEST(SdpaCudaGlue, SinksReachCudaFlashAndTheDecodeKernelOnly) {
  const Family& f = *builtin_registry().family("sdpa");
  const ProblemPtr fwd_p = f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr_sink");
  const ProblemPtr bwd_p = f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d128_causal_lr_sink_bwd");
  const ProblemPtr paged_p = f.parse_id("bf16_b4_hq4_hkv2_sq1x20x0x4_sk33x400x9x18_d64_causal_lr_sink_paged_page16");
  const auto fwd = abi_struct<opcts_sdpa_params>(f.abi_params(*fwd_p));
  const auto bwd = abi_struct<opcts_sdpa_params>(f.abi_params(*bwd_p));
  const auto paged = abi_struct<opcts_sdpa_params>(f.abi_params(*paged_p));
  const auto plain =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr")));
  EXPECT_TRUE(cuda::sdpa_params_of(fwd).has_sinks);
  EXPECT_FALSE(cuda::sdpa_params_of(plain).has_sinks);
  float sinks[4] = {}, dsinks[4] = {};
  const int64_t heads[1] = {4};
  opcts_tensor t[2] = {};
  t[0].name = "sinks", t[0].data = sinks, t[0].shape = heads, t[0].ndim = 1;
  t[1].name = "dsinks", t[1].data = dsinks, t[1].shape = heads, t[1].ndim = 1;
  const cuda::SdpaBackwardParams bp = cuda::sdpa_backward_params_of(bwd, t, 2);
  EXPECT_TRUE(bp.fwd.has_sinks);
  EXPECT_EQ(bp.fwd.sinks, sinks);
  EXPECT_EQ(bp.d_sinks, dsinks);

  RowSupports supports;
  const char* const reason = supports.reason;
  EXPECT_EQ(supports(kFlashRow, fwd), 1) << reason;
  EXPECT_EQ(supports(kFlashRow, bwd), 1) << reason;
  EXPECT_EQ(flash_tactics(*bwd_p), (Tactics{"tc", "tc2", "fma"}));  // sinks: every backward kernel
  EXPECT_EQ(supports(kDecodeRow, paged), 1) << reason;
  for (const opcts_sdpa_params* c : {&fwd, &bwd}) {
    EXPECT_EQ(supports(kMathRow, *c), 0);
    EXPECT_NE(std::string(reason).find("attention sinks"), std::string::npos) << reason;
  }

  // The row table: which rows the runner hands a sink problem (abi_gap empty) and which it SKIPs.
  EXPECT_EQ(gap("cuda.flash", *fwd_p), "");
  EXPECT_EQ(gap("cuda.flash", *bwd_p), "");
  EXPECT_EQ(gap("cuda.flash_decode", *paged_p), "");
  expect_other_cuda_rows_skip(*fwd_p, 4, "ABI 1.5");
}

// ALiBi (ABI 1.6: SdpaParams::alibi from the struct's alibi, the "alibi_slopes" tensor) reaches
// cuda.flash, forward (the general variant) and backward (the FMA kernel, its only tactic there,
// whose 32-key blocks the determinism claim then counts), and cuda.flash_decode's scores. cuda.math
// declines it in supports; every other CUDA row declares a minor below 1.6, so the runner SKIPs
// ALiBi problems there before asking.
TEST(SdpaCudaGlue, AlibiReachesCudaFlashItsFmaBackwardAndTheDecodeKernel) {
  const Family& f = *builtin_registry().family("sdpa");
  const ProblemPtr fwd_p = f.parse_id("bf16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_alibib");
  const ProblemPtr bwd_p = f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d128_causal_lr_alibi_bwd");
  const ProblemPtr varlen_p = f.parse_id("bf16_b2_hq4_hkv2_sq3x4_sk5x6_d64_causal_lr_alibib_varlen_bwd");
  const ProblemPtr paged_p = f.parse_id("bf16_b4_hq4_hkv2_sq1x20x0x4_sk33x400x9x18_d64_causal_lr_alibi_paged_page16");
  const auto fwd = abi_struct<opcts_sdpa_params>(f.abi_params(*fwd_p));
  const auto bwd = abi_struct<opcts_sdpa_params>(f.abi_params(*bwd_p));
  const auto varlen = abi_struct<opcts_sdpa_params>(f.abi_params(*varlen_p));
  const auto paged = abi_struct<opcts_sdpa_params>(f.abi_params(*paged_p));
  const auto plain =
      abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id("bf16_b1_hq4_hkv2_sq26_sk48_d64_causal_lr")));
  EXPECT_EQ(cuda::sdpa_params_of(fwd).alibi, cuda::SdpaAlibi::per_batch_head);
  EXPECT_EQ(cuda::sdpa_params_of(paged).alibi, cuda::SdpaAlibi::per_head);
  EXPECT_EQ(cuda::sdpa_params_of(plain).alibi, cuda::SdpaAlibi::none);
  float slopes[2 * 4] = {};
  const int64_t shape[2] = {2, 4};
  opcts_tensor t{};
  t.name = "alibi_slopes", t.data = slopes, t.shape = shape, t.ndim = 2;
  EXPECT_EQ(cuda::sdpa_params_of(fwd, &t, 1).alibi_slopes, slopes);
  EXPECT_EQ(cuda::sdpa_backward_params_of(bwd, &t, 1).fwd.alibi_slopes, slopes);
  EXPECT_EQ(cuda::sdpa_params_of(plain, &t, 1).alibi_slopes, nullptr);  // no alibi: never read
  // A value the ABI does not name is refused, naming the field.
  opcts_sdpa_params bad = fwd;
  bad.alibi = 3;
  EXPECT_THROW(cuda::sdpa_params_of(bad), AbiValueError);

  RowSupports supports;
  const char* const reason = supports.reason;
  EXPECT_EQ(supports(kFlashRow, fwd), 1) << reason;
  EXPECT_EQ(supports(kFlashRow, bwd), 1) << reason;
  EXPECT_EQ(supports(kFlashRow, varlen), 1) << reason;
  EXPECT_EQ(supports(kDecodeRow, paged), 1) << reason;
  for (const opcts_sdpa_params* c : {&fwd, &bwd}) {
    EXPECT_EQ(supports(kMathRow, *c), 0);
    EXPECT_NE(std::string(reason).find("ALiBi"), std::string::npos) << reason;
  }
  // The tensor-core kernels have no per-score term: the FMA kernel is the backward's only tactic.
  EXPECT_EQ(flash_tactics(*bwd_p), Tactics{"fma"});
  EXPECT_EQ(flash_tactics(*varlen_p), Tactics{"fma"});
  // The backward runs on the FMA kernel: Sk 77 spans three of its 32-key blocks (dQ's atomics),
  // where the tensor-core kernel's 64 would take two.
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_alibi_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk64_d64_nomask_alibi_bwd"), 1);

  // The row table: which rows the runner hands an ALiBi problem (abi_gap empty) and which it SKIPs.
  EXPECT_EQ(gap("cuda.flash", *fwd_p), "");
  EXPECT_EQ(gap("cuda.flash", *bwd_p), "");
  EXPECT_EQ(gap("cuda.flash", *varlen_p), "");
  EXPECT_EQ(gap("cuda.flash_decode", *paged_p), "");
  expect_other_cuda_rows_skip(*fwd_p, 5, "ABI 1.6");
}

// ABI 1.7. A mask of one row for every query ([.., 1, Sk]) reaches the kernels as seq stride 0 with
// head and batch strides of one row; cuda.flash (every kernel) and cuda.math run it. dbias runs on
// cuda.flash's backward (the FMA kernel, with fp32 partials per (batch, head slot, mask row, key):
// the query head, or the KV head where the mask broadcasts over heads); cuda.math and the
// two-block tensor-core row decline it; every other CUDA row declares a minor below 1.7.
TEST(SdpaCudaGlue, QueryBroadcastMasksReachFlashAndMathDbiasFlashOnly) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto params = [&](const ProblemPtr& p) { return abi_struct<opcts_sdpa_params>(f.abi_params(*p)); };
  const ProblemPtr fwd_p = f.parse_id("bf16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_amaskbk");
  const ProblemPtr bool_p = f.parse_id("bf16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_bmaskbhk_bwd");
  const ProblemPtr db_rows_p = f.parse_id("bf16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_cap5_amaskhk_dbias_bwd");
  const ProblemPtr db_all_p = f.parse_id("bf16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_amaskk_dbias_bwd");
  const ProblemPtr db_query_p = f.parse_id("fp16_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_amaskb_dbias_bwd");
  const auto fwd = params(fwd_p), boolean = params(bool_p), db_rows = params(db_rows_p), db_all = params(db_all_p),
             db_query = params(db_query_p);
  const cuda::SdpaStrides one_row = cuda::sdpa_params_of(fwd).mask_strides;
  EXPECT_EQ(one_row.batch, 48);
  EXPECT_EQ(one_row.head, 0);
  EXPECT_EQ(one_row.seq, 0);
  const cuda::SdpaStrides per_head = cuda::sdpa_params_of(boolean).mask_strides;
  EXPECT_EQ(per_head.batch, 4 * 48);
  EXPECT_EQ(per_head.head, 48);
  EXPECT_EQ(per_head.seq, 0);
  const cuda::SdpaStrides per_query = cuda::sdpa_params_of(db_query).mask_strides;
  EXPECT_EQ(per_query.batch, 26 * 48);
  EXPECT_EQ(per_query.head, 0);
  EXPECT_EQ(per_query.seq, 48);

  // dbias's tensor and its fp32 partials: head slots Hq (per head) or Hkv, one row or Sq.
  uint16_t dbias[4 * 48] = {};
  const int64_t shape[4] = {1, 4, 1, 48};
  opcts_tensor t{};
  t.name = "dbias", t.data = dbias, t.shape = shape, t.ndim = 4;
  const cuda::SdpaBackwardParams bp = cuda::sdpa_backward_params_of(db_rows, &t, 1);
  EXPECT_TRUE(bp.dbias);
  EXPECT_EQ(bp.d_bias, dbias);
  EXPECT_FALSE(cuda::sdpa_backward_params_of(boolean, &t, 1).dbias);
  EXPECT_EQ(cuda::sdpa_backward_params_of(boolean, &t, 1).d_bias, nullptr);
  EXPECT_EQ(cuda::sdpa_flash_dbias_scratch_bytes(bp), 4 * 2 * 4 * 1 * 48);
  EXPECT_EQ(cuda::sdpa_flash_dbias_scratch_bytes(cuda::sdpa_backward_params_of(db_all)), 4 * 2 * 2 * 1 * 48);
  EXPECT_EQ(cuda::sdpa_flash_dbias_scratch_bytes(cuda::sdpa_backward_params_of(db_query)), 4 * 2 * 2 * 26 * 48);
  EXPECT_EQ(cuda::sdpa_flash_dbias_scratch_bytes(cuda::sdpa_backward_params_of(boolean)), 0);

  // The kernel refuses a dbias it has nowhere to write.
  alignas(16) static unsigned char buf[2 * 4 * 26 * 64 * 2];  // host stand-ins, never read
  cuda::SdpaBackwardParams bare = cuda::sdpa_backward_params_of(db_all);
  bare.fwd.q = bare.fwd.k = bare.fwd.v = bare.fwd.attn_mask = buf;
  bare.fwd.o = bare.d_q = bare.d_k = bare.d_v = buf;
  bare.d_o = buf;
  const char* why = nullptr;
  EXPECT_FALSE(cuda::sdpa_flash_backward_supports(bare, &why));
  EXPECT_NE(std::string(why).find("without a dbias tensor"), std::string::npos) << why;
  bare.d_bias = buf;
  EXPECT_TRUE(cuda::sdpa_flash_backward_supports(bare, &why)) << why;

  RowSupports supports;
  const char* const reason = supports.reason;
  for (const opcts_sdpa_params* c : {&fwd, &boolean, &db_rows, &db_all, &db_query})
    EXPECT_EQ(supports(kFlashRow, *c), 1) << reason;
  // (cuda.math's acceptance makes its cuBLAS handle, which needs a GPU: the row table below.)
  for (const opcts_sdpa_params* c : {&db_rows, &db_all, &db_query}) {
    EXPECT_EQ(supports(kMathRow, *c), 0);
    EXPECT_NE(std::string(reason).find("dbias"), std::string::npos) << reason;
  }
  // A mask tensor's backward runs on the FMA kernel only (the tensor-core kernels have no mask).
  for (const ProblemPtr* p : {&bool_p, &db_rows_p, &db_all_p, &db_query_p})
    EXPECT_EQ(flash_tactics(**p), Tactics{"fma"});
  // fp32 has no dbias row: cuda.flash is fp16/bf16 only, cuda.math declines dbias.
  const auto fp32 = params(f.parse_id("fp32_b2_hq4_hkv2_sq26_sk48_d64_causal_lr_amaskk_dbias_bwd"));
  EXPECT_EQ(supports(kFlashRow, fp32), 0);
  EXPECT_NE(std::string(reason).find("fp32"), std::string::npos) << reason;
  // dbias is summed in a fixed order: the claim is dQ's (two blocks of 32 keys here, three at 77).
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk64_d64_nomask_amaskk_dbias_bwd"), 1);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_amaskk_dbias_bwd"), 0);

  // The row table: which rows the runner hands a 1.7 problem (abi_gap empty) and which it SKIPs.
  for (const ProblemPtr* p : {&fwd_p, &bool_p, &db_rows_p, &db_all_p, &db_query_p}) {
    EXPECT_EQ(gap("cuda.flash", **p), "");
    EXPECT_EQ(gap("cuda.math", **p), "");
    expect_other_cuda_rows_skip(**p, 6, "ABI 1.7");
  }
  EXPECT_NE(gap("cuda.flash_decode", *fwd_p).find("ABI 1.7"), std::string::npos);
}

// Block-sparse attention (ABI 1.8: SdpaParams::block_q and block_k from the struct's block_mask_q
// and block_mask_k, the "block_mask" tensor) reaches cuda.flash, forward (the general variant) and
// backward (the FMA kernel, whose 32-key blocks the determinism claim then counts; the tensor-core
// kernel's whole-tile products would multiply an unread block's NaN keys by 0, so fma is its only
// tactic there). cuda.math declines it in supports; every other CUDA row declares a minor below
// 1.8, so the runner SKIPs block-sparse problems there before asking.
TEST(SdpaCudaGlue, BlockMasksReachCudaFlashAndItsFmaBackward) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto abi = [&](const char* id) { return abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id(id))); };
  const char* const ids[3] = {"bf16_b1_hq4_hkv2_sq96_sk160_d64_causal_lr_blk32x32",
                              "bf16_b1_hq4_hkv2_sq96_sk160_d64_causal_lr_cap30_amaskh_blk32x32_bwd",
                              "bf16_b2_hq4_hkv2_sq150_sk100_d64_nomask_blk128x16_bwd"};
  const auto fwd = abi(ids[0]), bwd = abi(ids[1]), tall = abi(ids[2]);
  const auto plain = abi("bf16_b1_hq4_hkv2_sq96_sk160_d64_causal_lr");
  EXPECT_EQ(cuda::sdpa_params_of(fwd).block_q, 32);
  EXPECT_EQ(cuda::sdpa_params_of(fwd).block_k, 32);
  EXPECT_EQ(cuda::sdpa_backward_params_of(tall).fwd.block_q, 128);
  EXPECT_EQ(cuda::sdpa_backward_params_of(tall).fwd.block_k, 16);
  EXPECT_EQ(cuda::sdpa_params_of(plain).block_q, 0);
  uint8_t blocks[1 * 4 * 3 * 5] = {};  // [B, Hq, ceil(96 / 32), ceil(160 / 32)]
  const int64_t shape[4] = {1, 4, 3, 5};
  opcts_tensor t{};
  t.name = "block_mask", t.data = blocks, t.shape = shape, t.ndim = 4;
  EXPECT_EQ(cuda::sdpa_params_of(fwd, &t, 1).block_mask, blocks);
  EXPECT_EQ(cuda::sdpa_backward_params_of(bwd, &t, 1).fwd.block_mask, blocks);
  EXPECT_EQ(cuda::sdpa_params_of(plain, &t, 1).block_mask, nullptr);  // no block mask: never read

  RowSupports supports;
  const char* const reason = supports.reason;
  for (const opcts_sdpa_params* c : {&fwd, &bwd, &tall}) EXPECT_EQ(supports(kFlashRow, *c), 1) << reason;
  for (const opcts_sdpa_params* c : {&fwd, &bwd}) {
    EXPECT_EQ(supports(kMathRow, *c), 0);
    EXPECT_NE(std::string(reason).find("block-sparse attention"), std::string::npos) << reason;
  }
  // Without its block mask, the tall problem's backward would take the tensor-core kernel.
  EXPECT_EQ(flash_tactics(*f.parse_id(ids[2])), Tactics{"fma"});
  EXPECT_EQ(flash_tactics(*f.parse_id("bf16_b2_hq4_hkv2_sq150_sk100_d64_nomask_bwd")), (Tactics{"tc", "fma"}));
  // The flash kernel's own check: a block mask without its tensor, once the tensors are given.
  cuda::SdpaParams k = cuda::sdpa_params_of(fwd);
  alignas(16) static unsigned char buf[16];
  k.q = k.k = k.v = k.o = buf;
  const char* why = nullptr;
  EXPECT_FALSE(cuda::sdpa_flash_supports(k, &why));
  EXPECT_NE(std::string(why).find("block_mask tensor"), std::string::npos) << why;
  k.block_mask = blocks;
  EXPECT_TRUE(cuda::sdpa_flash_supports(k, &why)) << why;
  // The backward runs on the FMA kernel: Sk 77 spans three of its 32-key blocks (dQ's atomics),
  // where the tensor-core kernel's 64 would take two.
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk77_d64_nomask_blk16x16_bwd"), 0);
  EXPECT_EQ(flash_deterministic("fp16_b1_hq4_hkv2_sq40_sk64_d64_nomask_blk16x16_bwd"), 1);

  // The row table: which rows the runner hands a block-sparse problem (abi_gap empty) and which it
  // SKIPs.
  const auto* flash = dynamic_cast<const AbiImpl*>(builtin_registry().impl("cuda.flash"));
  ASSERT_NE(flash, nullptr);
  EXPECT_GE(flash->abi_minor(), 8u);
  for (const char* id : ids) {
    const ProblemPtr p = f.parse_id(id);
    EXPECT_EQ(gap("cuda.flash", *p), "") << id;
    EXPECT_NE(gap("cuda.flash_decode", *p).find("ABI 1.8"), std::string::npos) << gap("cuda.flash_decode", *p);
    expect_other_cuda_rows_skip(*p, 7, "ABI 1.8");
  }
}

// FP8 (ABI 1.9): the struct's fp8, fp8_format and descale reach the kernels' parameters (the
// descale tensors when given; no q_descale under an fp8 KV cache). cuda.flash's forward takes fp8
// q, k, v and fp8 KV caches, e4m3fn and e5m2, descales per tensor and per (batch, KV head), with
// masks, softcap, sinks, ALiBi, the window and BSHD, its scratch the 16-bit copies of the codes;
// its other kernels and cuda.math decline fp8 in supports, and every other CUDA row declares a minor
// below 1.9, so the runner SKIPs fp8 problems there.
TEST(SdpaCudaGlue, Fp8ReachesCudaFlashsForwardOnly) {
  const Family& f = *builtin_registry().family("sdpa");
  const auto abi = [&](const char* id) { return abi_struct<opcts_sdpa_params>(f.abi_params(*f.parse_id(id))); };
  const char* const ids[5] = {"fp16_b2_hq4_hkv2_sq26_sk80_d64_causal_lr_fp8qkv",
                              "bf16_b2_hq8_hkv2_sq26_sk80_d64_causal_lr_fp8kv",
                              "bf16_b1_hq4_hkv2_sq40_sk72_d64_causal_lr_sink_alibi_cap30_bmaskbh_fp8qkvh",
                              "bf16_b1_hq4_hkv2_sq40_sk72_d64_causal_lr_alibi_cap30_amask_fp8kvh",
                              "fp16_b1_hq4_hkv2_sq40_sk72_d64_causal_lr_scale1_win20x0_fp8kve5m2h_poison_bshd"};
  const auto qkv = abi(ids[0]), kv = abi(ids[1]), e5m2h = abi(ids[4]);
  const cuda::SdpaParams kq = cuda::sdpa_params_of(qkv), kk = cuda::sdpa_params_of(kv),
                         ke = cuda::sdpa_params_of(e5m2h);
  EXPECT_EQ(kq.fp8, cuda::SdpaFp8::qkv);
  EXPECT_EQ(kq.fp8_format, OPCTS_DL_FLOAT8_E4M3FN);
  EXPECT_FALSE(kq.descale_per_head);
  EXPECT_EQ(kq.dtype, cuda::SdpaDType::fp16);  // O's
  EXPECT_EQ(kk.fp8, cuda::SdpaFp8::kv);
  EXPECT_EQ(ke.fp8_format, OPCTS_DL_FLOAT8_E5M2);
  EXPECT_TRUE(ke.descale_per_head);
  EXPECT_EQ(cuda::sdpa_params_of(abi("bf16_b2_hq8_hkv2_sq26_sk80_d64_causal_lr")).fp8, cuda::SdpaFp8::none);

  float qd = 0, kd = 0, vd = 0;
  opcts_tensor t[3] = {};
  t[0].name = "q_descale", t[0].data = &qd;
  t[1].name = "k_descale", t[1].data = &kd;
  t[2].name = "v_descale", t[2].data = &vd;
  const cuda::SdpaParams tq = cuda::sdpa_params_of(qkv, t, 3), tk = cuda::sdpa_params_of(kv, t, 3);
  EXPECT_EQ(tq.q_descale, &qd);
  EXPECT_EQ(tq.k_descale, &kd);
  EXPECT_EQ(tq.v_descale, &vd);
  EXPECT_EQ(tk.q_descale, nullptr);  // the queries are in the dtype
  EXPECT_EQ(tk.k_descale, &kd);

  // The 16-bit copies: q (under qkv), k and v, 2 bytes an element.
  EXPECT_EQ(cuda::sdpa_flash_scratch_bytes(kq), 2 * (2 * 4 * 26 * 64 + 2 * (2 * 2 * 80 * 64)));
  EXPECT_EQ(cuda::sdpa_flash_scratch_bytes(kk), 2 * (2 * (2 * 2 * 80 * 64)));
  EXPECT_EQ(cuda::sdpa_flash_scratch_bytes(cuda::sdpa_params_of(abi("bf16_b2_hq8_hkv2_sq26_sk80_d64_causal_lr"))), 0);

  RowSupports supports;
  const char* const reason = supports.reason;
  for (const char* id : ids) EXPECT_EQ(supports(kFlashRow, abi(id)), 1) << id << ": " << reason;
  EXPECT_EQ(supports(kMathRow, qkv), 0);
  EXPECT_NE(std::string(reason).find("fp8 attention runs on cuda.flash's forward"), std::string::npos) << reason;
  EXPECT_EQ(supports(kDecodeRow, kv), 0);  // a dense problem

  // The flash kernel's own checks, once the tensors are given: the descales, the format, the
  // layout and block masks.
  cuda::SdpaParams k = kq;
  alignas(16) static unsigned char buf[16];
  k.q = k.k = k.v = k.o = buf;
  const char* why = nullptr;
  EXPECT_FALSE(cuda::sdpa_flash_supports(k, &why));
  EXPECT_NE(std::string(why).find("descale tensors"), std::string::npos) << why;
  k.k_descale = k.v_descale = &kd;
  EXPECT_FALSE(cuda::sdpa_flash_supports(k, &why));  // fp8 q without q_descale
  k.q_descale = &qd;
  EXPECT_TRUE(cuda::sdpa_flash_supports(k, &why)) << why;
  cuda::SdpaParams fnuz = k;
  fnuz.fp8_format = OPCTS_DL_FLOAT8_E4M3FNUZ;
  EXPECT_FALSE(cuda::sdpa_flash_supports(fnuz, &why));
  EXPECT_NE(std::string(why).find("e4m3fn or e5m2"), std::string::npos) << why;
  cuda::SdpaParams blocks = k;
  blocks.block_q = blocks.block_k = 16;
  blocks.block_mask = buf;
  EXPECT_FALSE(cuda::sdpa_flash_supports(blocks, &why));
  EXPECT_NE(std::string(why).find("fp8 with a block mask"), std::string::npos) << why;
  cuda::SdpaParams kvq = kk;
  kvq.q = kvq.k = kvq.v = kvq.o = buf;
  kvq.k_descale = kvq.v_descale = &kd;
  EXPECT_TRUE(cuda::sdpa_flash_supports(kvq, &why)) << why;  // no q_descale under an fp8 KV cache

  // The row table: cuda.flash and cuda.cudnn declare 1.9 and take them (cudnn's supports
  // decline these: per-head descales, a 16-bit O, fp8 KV); the others SKIP them on the ABI
  // (cuda.flash_decode 1.6, cuda.math 1.7, the rest at most 1.8).
  for (const char* id : ids) {
    const ProblemPtr p = f.parse_id(id);
    EXPECT_EQ(gap("cuda.flash", *p), "") << id;
    for (const char* other : {"cuda.flash_decode", "cuda.math"})
      EXPECT_NE(gap(other, *p).find("needs plugin ABI 1.9"), std::string::npos) << other << ": " << gap(other, *p);
    expect_other_cuda_rows_skip(*p, 8, "ABI 1.9");
  }
  EXPECT_EQ(dynamic_cast<const AbiImpl&>(*builtin_registry().impl("cuda.flash")).abi_minor(), 9u);
}

// The fp8 arithmetic of the flash forward (sdpa_fp8.cuh) on the CPU: every e4m3fn and e5m2 code
// widens exactly into bf16 and fp16 (the tile loads' copies), and P's e4m3fn rounding is
// numerics/minifloat_bits.hpp's (to nearest even, satfinite) on [0, 448] — at every e4m3fn value,
// the midpoints to its neighbours (ties), one fp32 step either side of them, and a sweep of [0, 1].
TEST(SdpaCudaGlue, Fp8CodesWidenExactlyAndPRoundsToE4m3fn) {
  for (uint32_t c = 0; c < 256; ++c)
    for (const bool e5m2 : {false, true}) {
      const float v = cuda::sdpa_fp8_to_f32(c, e5m2);
      const double expect = decode(e5m2 ? DType::e5m2 : DType::e4m3fn, c);
      if (std::isnan(expect)) {
        EXPECT_TRUE(std::isnan(v)) << c;
        continue;
      }
      EXPECT_EQ(static_cast<double>(v), expect) << c << (e5m2 ? " e5m2" : " e4m3fn");
      EXPECT_EQ(round_to(DType::bf16, v), static_cast<double>(v)) << c;
      EXPECT_EQ(round_to(DType::fp16, v), static_cast<double>(v)) << c;
    }
  const auto model = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const uint32_t b = bits::decode_to_fp32(bits::encode_fp32(u, bits::kE4m3fn, true), bits::kE4m3fn);
    float r;
    std::memcpy(&r, &b, sizeof r);
    return r;
  };
  const auto check = [&](float x) {
    const float got = cuda::sdpa_round_p_e4m3fn(x), want = model(x);
    EXPECT_EQ(got, want) << std::hexfloat << x;
    EXPECT_EQ(static_cast<double>(got), round_to(DType::e4m3fn, x)) << std::hexfloat << x;
  };
  std::vector<float> values;
  for (uint32_t c = 0; c < 0x7F; ++c) values.push_back(cuda::sdpa_fp8_to_f32(c, false));  // 0 to 448
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    for (const float x : {v, std::nextafter(v, 0.f), std::nextafter(v, 1e9f)}) check(x);
    if (i + 1 < values.size()) {
      const float mid = (v + values[i + 1]) / 2;  // exact: a tie
      for (const float x : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) check(x);
    }
  }
  for (uint32_t u = 0; u <= 0x3F800000u; u += 997) {  // [0, 1] in fp32 steps of 997 ulps
    float x;
    std::memcpy(&x, &u, sizeof x);
    check(x);
  }
  EXPECT_EQ(cuda::sdpa_round_p_e4m3fn(1000.f), 448.f);  // satfinite
  EXPECT_TRUE(std::isnan(cuda::sdpa_round_p_e4m3fn(std::numeric_limits<float>::quiet_NaN())));
}

// The varlen backward's determinism claim knows only the longest lengths: within two key blocks
// of the FMA kernel (32 keys) it holds, past them it is not claimed.
TEST(SdpaCudaGlue, TheVarlenBackwardClaimsDeterminismWithinTwoKeyBlocks) {
  EXPECT_EQ(flash_deterministic("bf16_b2_hq4_hkv2_sq5x64_sk9x64_d64_nomask_varlen_bwd"), 1);
  EXPECT_EQ(flash_deterministic("bf16_b2_hq4_hkv2_sq5x64_sk9x65_d64_nomask_varlen_bwd"), 0);
  EXPECT_EQ(flash_deterministic("bf16_b2_hq4_hkv2_sq5x64_sk9x65_d64_nomask_varlen"), 1);  // the forward
}

}  // namespace
}  // namespace opcts
