// The grouped_mm family: grouped GEMMs of mixture-of-experts layers (torch._grouped_mm,
// torch._scaled_grouped_mm) — problem, id, inputs, fp64 reference and reduction statistics.
//
// Modes (aten/src/ATen/native/cuda/GroupedBlas.cpp; PyTorch's offs: int32 cumulative END offsets, one per
// group, along the split dimension; group g spans [offs[g-1], offs[g]), offs[-1] = 0):
//   2d_3d  A [Mt, K] split along M by offs, B [G, K, N]   → out [Mt, N]     (MoE forward)
//   3d_3d  A [G, M, K],                     B [G, K, N]   → out [G, M, N]   (batched, no offs)
//   2d_2d  A [M, Kt], B [Kt, N], both split along K       → out [G, M, N]   (weight gradient)
//   3d_2d  A [G, M, K], B [K, Nt] split along N by offs   → out [M, Nt]
// The problem's m (2d_3d), k (2d_2d) or n (3d_2d) is the sum of the group sizes, offs[G-1];
// `tail` more rows (columns) follow in the tensors past the last offset. Those rows of the
// output are left untouched, as PyTorch documents: the ABI backends hand the output filled
// with 0xFF bytes (bf16 NaN), the reference holds NaN there, and the comparison requires NaN
// in the same places (judge/compare.cpp specials_agree), so a finite value written there
// FAILs. (A NaN written there is indistinguishable from the poison: the comparison accepts any
// NaN.) K columns (2d_2d) past the last offset are never read. A group of zero rows writes
// nothing; a group of zero K (2d_2d) or a 3d_3d problem with K = 0 yields zeros.
//
// Recipes (out is bf16 in every recipe; the ones PyTorch's grouped GEMMs take):
//   bf16     A, B bf16 (torch._grouped_mm)
//   rowwise  A, B e4m3fn with fp32 dequant scales, one per row of A and one per column of B,
//            per group (torch._scaled_grouped_mm with rowwise scales)
//   mxfp8    A, B e4m3fn with e8m0 scales per 32 consecutive K elements (OCP MX v1.0)
//   rowwise_fnuz  rowwise over gfx942's e4m3fnuz (bias 8, max 240, 0x80 the only NaN: ml_dtypes
//            float8.h), PyTorch's e4m3 type on ROCm. Its inputs are the rowwise problem's
//            with the codes' bits unchanged and every scale doubled: a code of exponent field F
//            is 2^(F-7)·(1 + f/8) in e4m3fn and 2^(F-8)·(1 + f/8) in e4m3fnuz, so the formats'
//            bias difference is the factor 2 the scales absorb (what re-quantizing for MI300
//            does to an amax-derived scale: 448 → 240 halves the largest code, ~2× the
//            scale), and the dequantized operands, hence the reference, equal rowwise's.
// Storage (what the device gets; B is handed as Bᵀ, K contiguous, as PyTorch's fp8 grouped
// GEMMs require "mat2 to be transposed"):
//   "a"        2d_3d [Mt + tail, K]; 3d_3d, 3d_2d [G, M, K]; 2d_2d [M, Kt + tail]; row-major
//   "b"        Bᵀ: 2d_3d, 3d_3d [G, N, K]; 2d_2d [N, Kt + tail]; 3d_2d [Nt + tail, K]
//   "offs"     int32 [G] (every mode but 3d_3d)
//   rowwise "a_scale" fp32: 2d_3d [Mt + tail] (per row of A); 3d_3d, 3d_2d, 2d_2d [G, M]
//           "b_scale" fp32: 2d_3d, 3d_3d, 2d_2d [G, N]; 3d_2d [Nt + tail] (per column of B)
//   mxfp8  "a_scale", "b_scale" e8m0, 1-D: each group's [R, C] scales (R rows of the group's
//           operand, C = K_g/32) in the cuBLAS / to_blocked swizzled layout (128×4 tiles of 512
//           bytes, rows padded to Rp = round_up(R, 128), columns to Cp = round_up(C, 4):
//           refimpl/quant.hpp swizzled_offset), placed per group as torchao's MoE kernels do
//           (torchao/prototype/moe_training/kernels/mxfp8: torch_to_blocked_2d_M_groups,
//           triton_mx_block_rearrange_2d_K_groups, _per_group_3d), which PyTorch's MXFP8
//           grouped tests feed to _scaled_grouped_mm; the same table as the kernels' header
//           (families/grouped_mm/cuda/grouped_mm_kernels.hpp):
//             3-D operand (A of 3d_*, B of *_3d): [G, Rp·Cp], group g at g·Rp·Cp
//             row-split operand (A of 2d_3d, B of 3d_2d): [(rows + 128·G)·Cp] (rows: the
//               tensor's, tail included), group g at Σ_{h<g} round_up(size_h, 128)·Cp
//             K-split operands (2d_2d): [Rp, W], W = Kt/32 + 4·G (Kt: the tensor's K), group
//               g's [Rp, Cg] slab (Cg = round_up(K_g/32, 4)) at columns Σ_{h<g} Cg_h: its
//               flat swizzled offset f at (f / Cg)·W + c_g + f % Cg
//           Padding holds code 0. The placement depends on the offsets, so an impl reads them
//           before it checks the scale count.
// Output "out": bf16, row-major, shapes above.
//
// Inputs are drawn in the code domain (a random code per element, a random scale per block),
// so a DeepSeek-V3 layer costs a pass of Philox over its bytes: bf16 codes ±(1 + f)·2^e with a
// 7-bit f and e ∈ [-3, 0]; e4m3fn codes ±(1 + f)·2^e with a 3-bit f and e ∈ [-3, 3] (never NaN);
// rowwise scales (1 + f)·2^e, 23-bit f, e ∈ [-4, -1]; e8m0 scales 2^e, e ∈ [-4, 0] per block.
// Every dequantized value (code × scale) is exact in fp64.
//
// Group sizes along the split dimension come from the problem alone (not from the seed), so an
// id names them: `split: uniform` (equal parts), `skewed` (top-k routing skew, below), `single`
// (every row in group G/2, the others empty) or explicit `sizes: [...]`. Sizes are multiples of
// offset_multiple (16 or 32 where the recipe needs aligned offsets).
//
// Negative cases (argument contract; each breaks one rule and names the argument the impl must
// refuse, with `expect_error`): K or N not a multiple of 16 (fp8: 16-byte rows; mxfp8 K: 32),
// offsets not multiples of offset_multiple → "offs" (explicit sizes); and defects IN the tensors
// handed over (nothing in the parameter struct says so): offsets that decrease, a last offset
// past the tensor's extent, an offs of G − 1 entries while B (A for 3d_2d) has G groups (sizes
// passed where offsets are expected) → "offs"; one scale too few → "scale_a" / "scale_b"
// (PyTorch's argument names).
// Impls check offs before the scales whose count it fixes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/abi_enum.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"
#include "include/opcts/plugin.h"

namespace opcts::grouped_mm {

/// The mode and the recipe, valued by the ABI's constants (opcts_grouped_mm_params), each with
/// its one name table (YAML name and id token alike).
enum class Mode : int32_t {
  m2d_3d = OPCTS_GROUPED_2D_3D,
  m3d_3d = OPCTS_GROUPED_3D_3D,
  m2d_2d = OPCTS_GROUPED_2D_2D,
  m3d_2d = OPCTS_GROUPED_3D_2D,
};
inline constexpr std::array<EnumName<Mode>, 4> kModeNames{{
    {Mode::m2d_3d, "2d_3d", "2d_3d"},
    {Mode::m3d_3d, "3d_3d", "3d_3d"},
    {Mode::m2d_2d, "2d_2d", "2d_2d"},
    {Mode::m3d_2d, "3d_2d", "3d_2d"},
}};
constexpr const auto& enum_names(Mode) { return kModeNames; }
static_assert(abi_distinct<Mode>());
constexpr std::string_view to_string(Mode m) { return enum_name(m); }
enum class Recipe : int32_t {
  bf16 = OPCTS_GROUPED_BF16,
  rowwise = OPCTS_GROUPED_ROWWISE,
  mxfp8 = OPCTS_GROUPED_MXFP8,
  rowwise_fnuz = OPCTS_GROUPED_ROWWISE_FNUZ,
};
inline constexpr std::array<EnumName<Recipe>, 4> kRecipeNames{{
    {Recipe::bf16, "bf16", "bf16"},
    {Recipe::rowwise, "rowwise", "rowwise"},
    {Recipe::mxfp8, "mxfp8", "mxfp8"},
    {Recipe::rowwise_fnuz, "rowwise_fnuz", "rowwise_fnuz"},
}};
constexpr const auto& enum_names(Recipe) { return kRecipeNames; }
static_assert(abi_distinct<Recipe>());
constexpr std::string_view to_string(Recipe r) { return enum_name(r); }
/// rowwise or rowwise_fnuz: fp32 scales per row of A and per column of B.
inline bool is_rowwise(Recipe r) { return r == Recipe::rowwise || r == Recipe::rowwise_fnuz; }
/// The element dtype of a and b: bf16, e4m3fn or e4m3fnuz.
DType element_dtype(Recipe r);
/// How the split dimension is cut into groups (file comment).
enum class Split { uniform, skewed, single, sizes };
/// A deliberately wrong input for a negative case (file comment).
enum class Defect { none, offs_decreasing, offs_out_of_range, offs_count, a_scale_count, b_scale_count };
std::string_view to_string(Defect d);

struct Problem {
  Mode mode = Mode::m2d_3d;
  Recipe recipe = Recipe::bf16;
  int64_t groups = 1;
  int64_t m = 0, n = 0, k = 0;  // the split dimension's value is the sum of the group sizes
  Split split = Split::uniform;
  std::vector<int64_t> sizes;  // Split::sizes only
  int64_t tail = 0;            // rows (2d_3d), K (2d_2d) or columns (3d_2d) past the last offset
  Defect defect = Defect::none;
  std::string expect_error;  // the argument a negative case's impls must refuse; "" otherwise

  bool has_offs() const { return mode != Mode::m3d_3d; }
  bool scaled() const { return recipe != Recipe::bf16; }
  /// The summed extent of the split dimension (m, k or n; 0 for 3d_3d).
  int64_t split_total() const;
  /// Throws std::invalid_argument naming the field for a malformed problem, and for a contract
  /// violation whose expect_error does not name it.
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// The multiple every group size (offset) must be (families/grouped_mm/cuda/grouped_mm_kernels.hpp,
/// grouped_offs_multiple): 32 for mxfp8 along every split (an MX block never straddles two
/// groups along K; PyTorch's MXFP8 grouped tests use jagged offsets that are multiples of 32
/// along M too), 16 for rowwise 2d_2d (fp8 K in multiples of 16), 1 otherwise.
int64_t offset_multiple(const Problem& p);
/// The K and N multiples the recipe needs: K 16 (rowwise), 32 (mxfp8), 1 (bf16); N 16 for fp8.
int64_t k_multiple(const Problem& p);
int64_t n_multiple(const Problem& p);

/// The group sizes along the split dimension (G of them; per group M, N, K for 3d_3d: all
/// equal to the per-group extent), a pure function of the problem.
std::vector<int64_t> group_sizes(const Problem& p);
/// The cumulative end offsets of group_sizes (what "offs" holds for a valid problem).
std::vector<int64_t> group_ends(const Problem& p);

/// Shapes of the tensors and of the output (file comment).
std::vector<int64_t> a_shape(const Problem& p);
std::vector<int64_t> b_shape(const Problem& p);
std::vector<int64_t> out_shape(const Problem& p);

/// One group's place in the tensors: A rows [a_row0, a_row0 + rows) and K columns [k0, k0 +
/// depth) of its A matrix (index `a_mat` of a 3-D A, 0 otherwise), B's matrix and N range, and
/// where its [rows, cols] block of the output starts (element offset, row stride `ld`).
struct GroupView {
  int64_t rows = 0, cols = 0, depth = 0;
  int64_t a_mat = 0, a_row0 = 0, k0 = 0;
  int64_t b_mat = 0, b_row0 = 0;  // Bᵀ rows = output columns
  int64_t out0 = 0, ld = 0;
};
GroupView group_view(const Problem& p, int64_t g);

/// mxfp8: where the scales of operand `which` ('a' or 'b') lie in its 1-D scale tensor (the
/// layout of the file comment). `index(g, r, c)` is the scale of row r of group g's operand
/// (A: its rows, B: its Bᵀ rows, i.e. output columns) and K block c.
struct MxLayout {
  enum Kind { batched, row_split, k_split } kind = batched;
  std::vector<int64_t> start;  // per group: first element (batched, row_split) or slab column (k_split)
  std::vector<int64_t> cols;   // per group: K blocks (depth / 32)
  int64_t width = 0;           // k_split: columns of the [Rp, W] matrix
  int64_t count = 0;           // elements of the tensor
  int64_t index(int64_t g, int64_t r, int64_t c) const;
};
MxLayout mx_layout(const Problem& p, char which);

/// The first break of the argument contract: {argument, why}, or nullopt. Arguments: "K", "N",
/// "offs", "scale_a", "scale_b".
using opcts::Violation;
std::optional<Violation> contract_violation(const Problem& p);

/// The plugin ABI's opcts_grouped_mm_params for a problem, as bytes (families/grouped_mm/family.cpp).
std::vector<unsigned char> abi_params(const Problem& p);

/// The field table (families/grouped_mm/fields.cpp): YAML keys mode, recipe, groups, m, n, k,
/// split, sizes, tail, defect, expect_error.
/// Id: MODE_RECIPE_gG_mM_nN_kK, then uniform | skew | single | s<S>x<S>..., tail<T>,
/// defect_<d>, expect_<argument>.
const kit::FieldTable<Problem>& fields();

/// The bug classes of the planted impls (host.grouped_*, cuda rows the kernels offer): an
/// empty group (2d_2d, zero K) writing the previous group's accumulator; rows (columns) past
/// the last offset overwritten with zeros; offs[g] read as group g's start; group g reading
/// group g + 1's scales (of B, where B holds one scale set per group of equal shape); stores of
/// a row running on to the next multiple of kPlantedNTile columns.
enum class PlantedBug { stale_empty_group, tail_overwritten, offs_as_starts, next_group_scales, spill_past_n };
constexpr int64_t kPlantedNTile = 16;
const std::vector<PlantedBug>& planted_bugs();
std::string_view to_string(PlantedBug b);
/// Why `bug` cannot change this problem's result ("" when it can): a planted impl SKIPs those
/// problems, so every case it runs is one it must fail.
std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug);

/// The inputs (see the file comment), a pure function of (problem, seed).
TensorMap make_inputs(const Problem& p, uint64_t seed);

/// The fp64 reference ("out": the exact value rounded once to bf16, NaN on rows past the last
/// offset) and its reduction statistics for the `bounded` metric (Σ|t|, Σt², |Σt|; the terms
/// are the largest group's K), from which each impl's accumulator model gives the bound
/// (judge/accumulator.hpp).
References reference(const Problem& p, const TensorMap& inputs);

/// What reference() states of every element's reduction besides its sums: terms (the largest
/// group's K), ragged, zero_mean and the products' term_bits; abs_sum, sq_sum and magnitude empty.
ReductionStats reduction_shape(const Problem& p);
/// One element of a group's block as reference() gives it, from its dequantized operands (each
/// code times its scale, exact in fp64): a(k) along the element's row of A and b(k) along its
/// column of B for k in [0, depth), the group's K. For callers that make the operands elsewhere
/// (families/grouped_mm/bench/ hashes them on the device) and judge elements one by one.
struct ElementReference {
  double want = 0;       // Σ_k a(k)·b(k), unrounded (the exact value of "out")
  double abs_sum = 0;    // S = Σ_k |a(k)·b(k)|
  double sq_sum = 0;     // Q = Σ_k (a(k)·b(k))²
  double magnitude = 0;  // X = |want|
};
ElementReference reference_element(int64_t depth, const std::function<double(int64_t)>& a,
                                   const std::function<double(int64_t)>& b);

/// The edge classes of docs/coverage.md that apply to this family, in report order, and those
/// `p` reaches (families/grouped_mm/coverage.cpp; Family::edge_classes).
std::vector<std::string> edge_classes();
std::vector<std::string> edge_classes_of(const Problem& p);

}  // namespace opcts::grouped_mm

namespace opcts {
/// Registers the grouped_mm family.
void register_grouped_mm_family(Registry& reg);
}  // namespace opcts
