// The scaled_mm family: FP8 / MX / NVFP4 scaled GEMMs — problem, id, inputs, fp64 reference and error bound.
//
// Semantics (OCP MX v1.0; cuBLASLt docs, cublasLtMatmul; families/scaled_mm/cuda/scaled_mm_kernels.hpp):
//   D[m, n] = out( os · ( g · Σ_k deq(A)[m, k] · deq(B)[k, n]  + bias[n] ) )
// deq applies each operand's dequant scales (x ≈ q · scale), g is the NVFP4 global scale
// fp32(g_A · g_B) (1 otherwise), os the output scale (e4m3fn output only, else 1) and out()
// rounds once to the output dtype, to nearest even (e4m3fn: satfinite).
//
// Recipes (A scales / B scales, per operand of R rows and K columns; quant::Recipe):
//   tensorwise               scalar fp32 / scalar fp32
//   rowwise                  fp32 per row of A [M] / per column of B [N]
//   blockwise_1x128_128x128  fp32 1×128 blocks, [M, ceil(K/128)] column-major / fp32 128×128
//                            blocks, [ceil(N/128), ceil(K/128)] row-major (DeepSeek-V3)
//   blockwise_1x128_1x128    fp32 1×128 / fp32 1×128, both column-major
//   mxfp8                    e8m0 per 1×32 / e8m0 per 1×32 (elements e4m3fn or e5m2)
//   mxfp4                    e8m0 per 1×32 / e8m0 per 1×32 (elements e2m1fn)
//   nvfp4                    ue4m3 per 1×16 / ue4m3 per 1×16, plus fp32 global scales (e2m1fn)
// MX and NVFP4 scales are swizzled (cuBLAS 128×4 tiles) unless the problem asks for row-major.
//
// Inputs (TensorMap), exactly what a device uploads:
//   "a"        codes [M, K] (shape), strides (lda, 1) for a row-major A or (1, lda) for a
//              column-major one: the storage is the device buffer (e2m1 packed two per byte)
//   "b"        Bᵀ codes [N, K]: strides (ldb, 1) for a column-major B (K contiguous, the "N"
//              of TN), (1, ldb) for a row-major B
//   "a_scale", "b_scale"  in the recipe's dtype and layout (table above)
//   "global_scale"  fp32 [1], g (nvfp4 only)
//   "out_scale"     fp32 [1], os (e4m3fn output only)
//   "bias"          [N] in the output dtype (bf16 / fp16 outputs)
// Output "d": [M, N] row-major in the output dtype.
//
// Fills:
//   random  A, Bᵀ ~ N(0, 1)·2^scale_exp in fp32 with row and 32-chunk magnitudes 2^0..2^3,
//           quantized by refimpl/quant (so the reference sees the codes and scales the device
//           sees); bias ~ N(0, σ²) rounded to its dtype, σ the RMS of an output element.
//   exact   codes are small integers and scales non-unit powers of two, chosen so every
//           product and every partial sum is exact in fp32 and in a 14-bit adder promoting every
//           128 products (see exact_ranges); the result is then one known real number per
//           element, and the one rounding to the output dtype (nearest even) is deterministic:
//           a correct device matches bit for bit.
//
// Negative cases: a problem that breaks the operator's argument contract (K not a multiple of
// 16 — 32 for MX and fp4 —, a leading dimension that is not 16-byte aligned or too small, fp4
// operands not K-major, a scale tensor of the wrong shape or dtype) is valid only with
// `expect_error: <argument>` naming the argument an impl must refuse (Family::expected_error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/abi_enum.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"
#include "include/opcts/plugin.h"
#include "refimpl/quant.hpp"

namespace opcts::scaled_mm {

/// The recipe, valued by the ABI's constants (opcts_scaled_mm_params::recipe), with its one name
/// table (YAML name and id token alike).
enum class Recipe : int32_t {
  tensorwise = OPCTS_MM_TENSORWISE,
  rowwise = OPCTS_MM_ROWWISE,
  blockwise_1x128_128x128 = OPCTS_MM_BLOCKWISE_1X128_128X128,
  blockwise_1x128_1x128 = OPCTS_MM_BLOCKWISE_1X128_1X128,
  mxfp8 = OPCTS_MM_MXFP8,
  mxfp4 = OPCTS_MM_MXFP4,
  nvfp4 = OPCTS_MM_NVFP4,
};
inline constexpr std::array<EnumName<Recipe>, 7> kRecipeNames{{
    {Recipe::tensorwise, "tensorwise", "tensorwise"},
    {Recipe::rowwise, "rowwise", "rowwise"},
    {Recipe::blockwise_1x128_128x128, "blockwise_1x128_128x128", "blockwise_1x128_128x128"},
    {Recipe::blockwise_1x128_1x128, "blockwise_1x128_1x128", "blockwise_1x128_1x128"},
    {Recipe::mxfp8, "mxfp8", "mxfp8"},
    {Recipe::mxfp4, "mxfp4", "mxfp4"},
    {Recipe::nvfp4, "nvfp4", "nvfp4"},
}};
constexpr const auto& enum_names(Recipe) { return kRecipeNames; }
static_assert(abi_distinct<Recipe>());
constexpr std::string_view to_string(Recipe r) { return enum_name(r); }
/// mxfp4 or nvfp4: packed e2m1 operands.
constexpr bool is_fp4(Recipe r) { return r == Recipe::mxfp4 || r == Recipe::nvfp4; }
/// mxfp8, mxfp4 or nvfp4: scales per block of 32 or 16 K elements, in a scale dtype.
constexpr bool is_block_scaled(Recipe r) { return r == Recipe::mxfp8 || is_fp4(r); }

enum class Layout { row, col };
enum class Fill { random, exact };
/// A deliberately wrong input for a negative case: a scale tensor one block short, or in the
/// wrong dtype.
enum class Defect { none, a_scale_shape, b_scale_shape, a_scale_dtype, b_scale_dtype };
std::string_view to_string(Defect d);

struct Problem {
  int64_t m = 1, n = 1, k = 16;
  Layout a_layout = Layout::row;  // TN: A row-major (K contiguous) ...
  Layout b_layout = Layout::col;  // ... and B column-major (K contiguous), B passed as Bᵀ [N, K]
  int64_t lda = 0, ldb = 0;       // leading dimensions in elements; 0 = tight (K or M / N)
  Recipe recipe = Recipe::tensorwise;
  DType a_elem = DType::e4m3fn, b_elem = DType::e4m3fn;
  quant::MxScaleMode mx_mode = quant::MxScaleMode::floor;          // mxfp8 / mxfp4
  quant::ScaleLayout scale_layout = quant::ScaleLayout::swizzled;  // mxfp8 / mxfp4 / nvfp4
  DType out = DType::bf16;
  double out_scale = 1.0;  // e4m3fn output only
  bool bias = false;
  bool fast_accum = false;
  Fill fill = Fill::random;
  int scale_exp = 0;  // data magnitudes (random) or scale exponents (exact) shifted by 2^scale_exp
  Defect defect = Defect::none;
  std::string expect_error;  // the argument a negative case's impls must refuse; "" otherwise

  int64_t eff_lda() const;
  int64_t eff_ldb() const;
  bool is_mx() const { return recipe == Recipe::mxfp8 || recipe == Recipe::mxfp4; }
  bool is_fp4() const { return recipe == Recipe::mxfp4 || recipe == Recipe::nvfp4; }
  bool block_scaled() const { return is_mx() || recipe == Recipe::nvfp4; }
  /// The quantization schemes of A and of B (B as Bᵀ [N, K]).
  quant::Scheme a_scheme() const;
  quant::Scheme b_scheme() const;
  /// Scale layouts of A's and B's scale tensors (the kernel header's table).
  quant::ScaleLayout a_scale_layout() const;
  quant::ScaleLayout b_scale_layout() const;
  /// Throws std::invalid_argument naming the field for a malformed problem (element types the
  /// recipe does not take, out_scale off e4m3fn, fast_accum where no library has it, ...), and
  /// for a contract violation whose expect_error does not name it.
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// The plugin ABI's opcts_scaled_mm_params for a problem, as bytes (families/scaled_mm/family.cpp).
std::vector<unsigned char> abi_params(const Problem& p);

/// The field table (families/scaled_mm/fields.cpp): YAML keys m, n, k (or nk: {n, k}),
/// layout, lda, ldb, recipe, elem, mx_mode, scale_layout, out, out_scale, bias, fast_accum,
/// fill, scale_exp, defect, expect_error; the id below.
const kit::FieldTable<Problem>& fields();

/// The first break of the operator's argument contract (the rules cuBLASLt documents and
/// torch._scaled_mm checks): {argument, why}, or nullopt for a well-formed problem. Arguments:
/// "K", "lda", "ldb", "layout", "a_scale", "b_scale".
using opcts::Violation;
std::optional<Violation> contract_violation(const Problem& p);
/// The K multiple a recipe needs: 16 for fp8 recipes, 32 for MX and fp4 (a 16-byte row of
/// packed e2m1 holds 32 elements).
int64_t k_multiple(const Problem& p);

/// "tensorwise_e4m3fn_e4m3fn_tn_m128_n256_k512_out_bf16_bias_exact": recipe, A and B elements,
/// layout (cuBLAS letters: t = K contiguous for A / n = K contiguous for B), m n k, then
/// optional tokens in this order: lda<N> ldb<N>, floor|rceil (MX), scalerm (row-major MX/NVFP4
/// scales), out_<dtype>, os<v> (output scale, 'p' for '.', 'm' for '-'), bias, fastacc,
/// sexp<e> (scale_exp, 'm' for '-'), random|exact, defect_<d>, expect_<argument>.
std::string problem_id(const Problem& p);
/// Inverse of problem_id; throws std::invalid_argument naming the token it cannot read.
Problem parse_problem_id(std::string_view id);

/// The narrowest accumulator an exact fill stays exact in: kExactBits significant bits over
/// runs of kExactRun consecutive products (cuBLASLt FP8 on sm90 keeps 14 bits and promotes every
/// 128: docs/status/data/sm90_scaled_mm_accum_probe.txt), over the whole K with fast_accum
/// (never promoted), and IEEE fp32 over the whole K.
inline constexpr int kExactBits = 14;
inline constexpr int64_t kExactRun = 128;

/// Integer ranges of an exact fill: codes in [-a_max, a_max] and [-b_max, b_max], scale
/// exponents in [exp_lo, exp_lo + exp_span] per operand. Every product of codes times scales
/// is an integer multiple of the quantum 2^(2·exp_lo) and at most 2^term_bits quanta, with
/// term_bits = log2(a_max·b_max) + 2·exp_span chosen so that a run of kExactRun products (K
/// with fast_accum) stays below 2^(kExactBits-1) quanta and the whole K below 2^23: every
/// partial sum is exact in such an adder (no alignment loss: the grid is at most one quantum)
/// and in fp32. The comparison checks the model in use against term_bits (ReductionStats).
struct ExactRanges {
  int a_max = 1, b_max = 1;
  int exp_lo = -2, exp_span = 1;
  int term_bits = 0;
};
ExactRanges exact_ranges(const Problem& p);

/// The inputs (see the file comment), a pure function of (problem, seed) (families/scaled_mm/inputs.cpp).
TensorMap make_inputs(const Problem& p, uint64_t seed);

/// The random fill's share of Σ_k t_k² that the products of K elements [k0, k1) hold, in
/// expectation over the codes: the fill draws the values of each 32-wide K chunk of an operand
/// at a scale 2^(e_row + e_chunk) (random_operand), so a chunk's products weigh
/// 4^(e_chunk(a) + e_chunk(b)), whatever the row. `seed` is the case's (numerics/rng.hpp seed_of).
double random_fill_k_share(const Problem& p, uint64_t seed, int64_t k0, int64_t k1);

/// The dequant scale of operand `which` ('a' or 'b') at row r (M or N index) and K block kb of
/// the recipe's blocking, read from the scale tensor in the problem's layout (nvfp4's global
/// scale not included). NaN for NaN scale codes.
double scale_at(const Problem& p, const TensorMap& in, char which, int64_t r, int64_t kb);
/// The linear (row-major over its shape) index in the scale tensor that scale_at reads.
int64_t scale_index(const Problem& p, char which, int64_t r, int64_t kb);
/// The K block length of operand scales: 0 (one block: tensorwise, rowwise), 128, 32 or 16.
int64_t scale_block_k(const Problem& p);

/// The fp64 reference ("d": exact value rounded once to the output dtype) and the reduction
/// statistics of "d" for the `bounded` metric (Σ|t|, Σt², the epilogue's magnitude, the
/// exact fill's term_bits; families/scaled_mm/reference.cpp), from which each impl's accumulator model
/// gives its bound (judge/accumulator.hpp).
References reference(const Problem& p, const TensorMap& inputs);

/// The edge classes of docs/coverage.md that apply to this family, in report order, and those
/// `p` reaches (families/scaled_mm/coverage.cpp; Family::edge_classes).
std::vector<std::string> edge_classes();
std::vector<std::string> edge_classes_of(const Problem& p);

}  // namespace opcts::scaled_mm

namespace opcts {
/// Registers the scaled_mm family.
void register_scaled_mm_family(Registry& reg);
}  // namespace opcts
