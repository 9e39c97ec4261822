// host.int4: weight-only int4 matmul on the CPU with its own nibble addressing, dequantizing like a GPU kernel; plus
// nine planted bugs.
//
// Every weight is located by its own address arithmetic ((n, k) → byte and nibble of the
// packed buffer, the direction a kernel reads in; refimpl's packers go the other way),
// dequantized with one rounding to the activation dtype (the bf16/fp16 the tensor cores take),
// and the product is an fp32 GEMM (Eigen) rounded once to the dtype. The weight is dequantized
// a block of kColumns columns at a time (K × kColumns floats per thread, never the whole
// N × K matrix: a model weight is 0.2-0.9 GB as fp32), each block multiplied at once. Arguments
// are checked from the problem's sizes and the tensors' shapes, naming the argument
// ("group_size", "K", "N", "x", "weight", "scale_and_zero", "scales", "qzeros").
//
// Planted (Impl::planted, must FAIL):
//   host.int4_group0_scale      M = 1 uses group 0's scale (and zero) for every group, as a
//                               decode fast path that hoists the scale load out of the K loop
//   host.int4_nibble_swap       the two nibbles of every byte exchanged (the high-nibble-first
//                               vs low-nibble-first mix-up between tinygemm and MX/llama.cpp)
//   host.int4_zero_before_scale the zero point on the wrong side of the scale: tinygemm's float
//                               zero added before scaling, (q − 8 + zero)·scale; AWQ/GPTQ's
//                               integer zero after it, q·scale − z
//   host.int4_gptq_z            GPTQ's stored z − 1 used as the zero point (the +1 not undone)
//   host.int4_drop_partial_k    K processed in tiles of 128 and a partial last tile dropped
//   host.int4_drop_last_k       the last K element dropped (a loop bound off by one)
//   host.int4_fp16_as_bf16      an fp16 problem computed in bf16: x and ŵ rounded to bf16
//   host.int4_sum_in_dtype_64   the running fp32 sum rounded to the dtype every 64 K elements
//   host.int4_split_k4_in_dtype K split in 4 slices whose fp32 partial sums are rounded to the
//                               dtype, then added in fp32
#include <array>
#include <cstring>
#include <optional>

#include <Eigen/Dense>

#include "core/errors.hpp"
#include "core/spellings.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "gpu/host/host_impls.hpp"
#include "numerics/dtype.hpp"

namespace opcts {

namespace {

using int4_mm::Format;
using int4_mm::Problem;
using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

using ColF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;  // a block of weight columns, K contiguous
using Bug = std::optional<int4_mm::PlantedBug>;                     // nullopt: the real impl
using PB = int4_mm::PlantedBug;
// The planted impls' names; register_host_int4_mm adds one planted impl per row.
constexpr Spellings<PB, 9> kPlantedImpls{{{PB::group0_scale, "host.int4_group0_scale"},
                                          {PB::nibble_swap, "host.int4_nibble_swap"},
                                          {PB::zero_before_scale, "host.int4_zero_before_scale"},
                                          {PB::gptq_z, "host.int4_gptq_z"},
                                          {PB::drop_partial_k, "host.int4_drop_partial_k"},
                                          {PB::drop_last_k, "host.int4_drop_last_k"},
                                          {PB::fp16_as_bf16, "host.int4_fp16_as_bf16"},
                                          {PB::sum_in_dtype_64, "host.int4_sum_in_dtype_64"},
                                          {PB::split_k4_in_dtype, "host.int4_split_k4_in_dtype"}}};

constexpr int64_t kColumns = 64;  // weight columns dequantized per block

// v rounded to nearest even in bf16 or fp16, as a float (finite v; the fp16 rounding is
// numerics/dtype.hpp's round_to — clang before 15 has no _Float16 on x86 —, the bf16 one the usual
// carry into bit 16).
float round_to_16(DType t, float v) {
  if (t == DType::fp16) return static_cast<float>(round_to(DType::fp16, v));
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFFu + (u >> 16 & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

// Where a code sits: nibble `nibble` of the packed buffer (element order: nibble 2j is the
// low half of byte j).
int64_t tinygemm_nibble(int64_t n, int64_t k, int64_t K, int ikt) {
  const int64_t k_outer = K / (16 * ikt), ko = k / (16 * ikt);
  const int64_t tile = (k % (16 * ikt)) / 16;  // k-tile inside the super tile
  const int64_t kk = k % 16;
  const int64_t lane = 4 * (n % 8) + (kk % 8) / 2;
  const int64_t word = ((n / 8 * k_outer + ko) * 32 + lane) * (ikt / 2) + tile / 2;
  return 8 * word + 4 * (kk % 2) + 2 * (tile % 2) + kk / 8;
}

constexpr std::array<int, 8> kAwqSlot = {0, 4, 1, 5, 2, 6, 3, 7};  // column c of 8 → its nibble

int64_t code_nibble(const Problem& p, int64_t n, int64_t k) {
  const int64_t N = p.n, K = p.k;
  switch (p.format) {
    case Format::tinygemm: return tinygemm_nibble(n, k, K, p.inner_k_tiles);
    case Format::tinygemm_unpacked: return 2 * (n * (K / 2) + k / 2) + (k % 2 ? 0 : 1);  // even k: high nibble
    case Format::awq: return 8 * (k * (N / 8) + n / 8) + kAwqSlot[n % 8];
    case Format::gptq: return 8 * (k / 8 * N + n) + k % 8;
    case Format::q4_0: return 2 * (18 * (n * (K / 32) + k / 32) + 2 + k % 16) + (k % 32 >= 16 ? 1 : 0);
  }
  return 0;
}

unsigned nibble_at(const HostTensor& t, int64_t i, bool swap) {
  const auto b = static_cast<unsigned>(reinterpret_cast<const uint8_t*>(t.data())[i / 2]);
  return (i % 2 != swap ? b >> 4 : b) & 0xF;
}

void refuse_unless(bool ok, const char* arg, const std::string& why) {
  if (!ok) throw InvalidArgument(arg, "host.int4: " + why);
}

bool shape_is(const HostTensor& t, std::vector<int64_t> s) { return t.shape() == s; }

std::string shape_text(const HostTensor& t) {
  std::string s;
  for (int64_t d : t.shape()) s += (s.empty() ? "[" : ", ") + std::to_string(d);
  return s + "]";
}

void check_arguments(const Problem& p, const TensorMap& in) {
  const int64_t M = p.m, N = p.n, K = p.k, g = p.group;
  const bool q4 = p.format == Format::q4_0;
  refuse_unless(q4 ? g == 32 : g == 32 || g == 64 || g == 128 || g == 256, "group_size",
                "group size " + std::to_string(g) + " is not supported");
  refuse_unless(K % g == 0, "K", "K = " + std::to_string(K) + " is not a multiple of the group size");
  switch (p.format) {
    case Format::tinygemm:
      refuse_unless(K % (16 * p.inner_k_tiles) == 0, "K", "K is not a multiple of 16·inner_k_tiles");
      refuse_unless(N % 8 == 0, "N", "the tiled layout packs N in tiles of 8");
      break;
    case Format::awq:
    case Format::gptq:
      refuse_unless(K % 8 == 0, "K", "K is not a multiple of 8");
      refuse_unless(N % 8 == 0, "N", "8 columns share a 32-bit word");
      break;
    case Format::q4_0: refuse_unless(K % 32 == 0, "K", "Q4_0 blocks are 32 long"); break;
    case Format::tinygemm_unpacked: break;
  }
  refuse_unless(shape_is(in.at("x"), {M, K}) && in.at("x").dtype() == p.dtype, "x", "x must be [M, K] in the dtype");
  const int64_t nibbles = q4 ? N * (K / 32) * 36 : N * K;
  const HostTensor& w = in.at("weight");
  refuse_unless(w.dtype() == DType::uint4 && w.numel() == nibbles && w.is_contiguous(), "weight",
                "expected " + std::to_string(nibbles) + " packed nibbles, got " + std::to_string(w.numel()));
  const int64_t G = K / g;
  if (p.tinygemm()) {
    const HostTensor& sz = in.at("scale_and_zero");
    refuse_unless(shape_is(sz, {G, N, 2}) && sz.dtype() == p.dtype, "scale_and_zero",
                  "expected [" + std::to_string(G) + ", " + std::to_string(N) + ", 2], got " + shape_text(sz));
  } else if (!q4) {
    const HostTensor& sc = in.at("scales");
    refuse_unless(shape_is(sc, {G, N}) && sc.dtype() == p.dtype, "scales",
                  "expected [" + std::to_string(G) + ", " + std::to_string(N) + "], got " + shape_text(sc));
    const HostTensor& z = in.at("qzeros");
    refuse_unless(shape_is(z, {G, N / 8, 8}) && z.dtype() == DType::uint4, "qzeros",
                  "expected [" + std::to_string(G) + ", " + std::to_string(N / 8) + ", 8], got " + shape_text(z));
  }
}

// Scale and zero of (group, column) as the format stores them; Q4_0's d lives in the block.
struct GroupParams {
  double scale, zero;
};

GroupParams group_params(const Problem& p, const TensorMap& in, int64_t gi, int64_t n, Bug bug) {
  const int64_t N = p.n;
  switch (p.format) {
    case Format::tinygemm:
    case Format::tinygemm_unpacked: {
      const HostTensor& sz = in.at("scale_and_zero");
      return {sz.get(2 * (gi * N + n)), sz.get(2 * (gi * N + n) + 1)};
    }
    case Format::awq:
    case Format::gptq: {
      const unsigned stored = nibble_at(
          in.at("qzeros"), 8 * (gi * (N / 8) + n / 8) + (p.format == Format::awq ? kAwqSlot[n % 8] : n % 8), false);
      const bool undo = p.format == Format::gptq && bug != PB::gptq_z;
      return {in.at("scales").get(gi * N + n), static_cast<double>(stored + (undo ? 1 : 0))};
    }
    case Format::q4_0: {
      const auto* b = reinterpret_cast<const uint8_t*>(in.at("weight").data()) + 18 * (n * (p.k / 32) + gi);
      return {decode(DType::fp16, static_cast<uint64_t>(b[0] | b[1] << 8)), 8.0};
    }
  }
  return {0, 0};
}

double dequant(const Problem& p, unsigned q, const GroupParams& gp, Bug bug) {
  const double qd = static_cast<double>(q);
  if (p.tinygemm()) return bug == PB::zero_before_scale ? (qd - 8 + gp.zero) * gp.scale : (qd - 8) * gp.scale + gp.zero;
  if (p.format != Format::q4_0 && bug == PB::zero_before_scale) return qd * gp.scale - gp.zero;
  return (qd - gp.zero) * gp.scale;
}

// y[:, block] (fp32) for the dequantized columns w [K, nb] as the impl's accumulator adds them:
// one fp32 GEMM, or the planted structures (the sum rounded to the dtype every 64 K; four
// slices rounded to the dtype, then added).
void multiply(const MatF& x, const Eigen::Ref<const ColF>& w, Eigen::Ref<MatF> y, DType dtype, const Bug& bug) {
  const int64_t K = x.cols();
  const auto round_all = [dtype](auto&& m) { m = m.unaryExpr([dtype](float v) { return round_to_16(dtype, v); }); };
  if (bug == PB::sum_in_dtype_64) {
    MatF acc = MatF::Zero(y.rows(), y.cols());
    for (int64_t k0 = 0; k0 < K; k0 += int4_mm::kPlantedSumEvery) {
      const int64_t len = std::min(int4_mm::kPlantedSumEvery, K - k0);
      acc.noalias() += x.middleCols(k0, len) * w.middleRows(k0, len);
      round_all(acc);
    }
    y = acc;
  } else if (bug == PB::split_k4_in_dtype) {
    y.setZero();
    MatF part(y.rows(), y.cols());
    const int64_t slice = (K + int4_mm::kPlantedSplits - 1) / int4_mm::kPlantedSplits;
    for (int64_t k0 = 0; k0 < K; k0 += slice) {
      const int64_t len = std::min(slice, K - k0);
      part.noalias() = x.middleCols(k0, len) * w.middleRows(k0, len);
      round_all(part);
      y += part;
    }
  } else {
    y.noalias() = x * w;  // fp32 accumulation
  }
}

class HostInt4 final : public Impl {
 public:
  explicit HostInt4(Bug bug) : bug_(bug) {}
  std::string_view family() const override { return "int4_mm"; }
  std::string_view name() const override { return bug_ ? kPlantedImpls.of(*bug_) : "host.int4"; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return bug_.has_value(); }

  // A planted impl runs only problems that probe its bug (its cases are implied strict xfails).
  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (!bug_) return Support::yes();
    const std::string why = int4_mm::planted_bug_cannot_show(pp.as<Problem>(), *bug_);
    return why.empty() ? Support::yes() : Support::no(std::string(name()) + ": " + why);
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    check_arguments(p, in);
    const int64_t M = p.m, N = p.n, K = p.k, g = p.group;
    const bool swap = bug_ == PB::nibble_swap, as_bf16 = bug_ == PB::fp16_as_bf16;
    const int64_t k_end = bug_ == PB::drop_partial_k ? K / int4_mm::kPlantedKTile * int4_mm::kPlantedKTile
                          : bug_ == PB::drop_last_k  ? K - 1
                                                     : K;
    const HostTensor& w = in.at("weight");
    MatF x(M, K);
    const HostTensor& xt = in.at("x");
    for (int64_t i = 0; i < M * K; ++i) {
      const auto v = static_cast<float>(xt.get(i));
      x(i / K, i % K) = as_bf16 ? round_to_16(DType::bf16, v) : v;
    }
    MatF y(M, N);
    const int64_t blocks = (N + kColumns - 1) / kColumns;
#pragma omp parallel if (blocks > 1 && M * N * K + N * K > (1 << 20))
    {
      ColF wt = ColF::Zero(K, kColumns);  // Ŵ of a block, one rounding to the dtype per weight; past k_end zero
#pragma omp for schedule(dynamic)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t n0 = b * kColumns, nb = std::min(kColumns, N - n0);
        for (int64_t j = 0; j < nb; ++j) {
          const int64_t n = n0 + j;
          float* col = wt.col(j).data();
          for (int64_t gi = 0; gi < K / g; ++gi) {
            const GroupParams gp = group_params(p, in, bug_ == PB::group0_scale && M == 1 ? 0 : gi, n, bug_);
            float table[16];
            for (unsigned q = 0; q < 16; ++q) {
              table[q] = static_cast<float>(round_to(p.dtype, dequant(p, q, gp, bug_)));
              if (as_bf16) table[q] = round_to_16(DType::bf16, table[q]);
            }
            for (int64_t k = gi * g; k < std::min(k_end, gi * g + g); ++k)
              col[k] = table[nibble_at(w, code_nibble(p, n, k), swap)];
          }
        }
        multiply(x, wt.leftCols(nb), y.middleCols(n0, nb), p.dtype, bug_);
      }
    }
    TensorMap out;
    HostTensor& yt = out.emplace("y", HostTensor(p.dtype, {M, N})).first->second;
    for (int64_t i = 0; i < M * N; ++i) yt.set(i, static_cast<double>(y(i / N, i % N)));  // one rounding
    return out;
  }

 private:
  Bug bug_;
};

}  // namespace

void register_host_int4_mm(Registry& reg) {
  reg.add(std::make_unique<HostInt4>(std::nullopt));
  for (PB b : kPlantedImpls.values()) reg.add(std::make_unique<HostInt4>(b));
}

}  // namespace opcts
